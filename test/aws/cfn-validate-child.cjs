// aws-cdk-lib's CloudFormationValidatePlugin run on the templates named on stdin (the
// `stackTemplates` of CDK's validation context, as JSON), for test/aws/app.ts
// `CloudFormationValidateInChild`. Prints the plugin's report and the engine's version as JSON.
// CommonJS: `require` reads the one lazily loaded export it needs, where an ES import of
// aws-cdk-lib's index would evaluate every export.
const { readFileSync } = require('node:fs');
const { CloudFormationValidatePlugin } = require('aws-cdk-lib');

const stackTemplates = JSON.parse(readFileSync(0, 'utf8'));
const plugin = new CloudFormationValidatePlugin();
const report = plugin.validate({ templatePaths: stackTemplates.map((s) => s.templatePath), stackTemplates });
process.stdout.write(JSON.stringify({ version: plugin.version, report }));
