// aws-cdk-lib's CloudFormationValidatePlugin, for test/aws/cfn-validate-engine.ts
// `CloudFormationValidateInChild`: answers each request file `<n>.request` of the folder it is
// given (the `stackTemplates` of CDK's validation context, as JSON) with `<n>.answer` (the
// plugin's report and the engine's version, or the error it threw), in order, with one plugin:
// its engine starts once. Ends when its stdin closes (the test worker ended or stopped it).
// CommonJS: `require` reads the one lazily loaded export it needs, where an ES import of
// aws-cdk-lib's index would evaluate every export.
const { existsSync, readFileSync, renameSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { CloudFormationValidatePlugin } = require('aws-cdk-lib');

const dir = process.argv[2];
const plugin = new CloudFormationValidatePlugin();
let next = 1;

function answerNext() {
  const request = join(dir, `${next}.request`);
  if (!existsSync(request)) {
    setTimeout(answerNext, 10);
    return;
  }
  let answer;
  try {
    const stackTemplates = JSON.parse(readFileSync(request, 'utf8'));
    const report = plugin.validate({
      templatePaths: stackTemplates.map((s) => s.templatePath),
      stackTemplates,
    });
    answer = { report, version: plugin.version };
  } catch (e) {
    answer = { error: e instanceof Error ? (e.stack ?? e.message) : String(e) };
  }
  writeFileSync(join(dir, `${next}.answer.tmp`), JSON.stringify(answer));
  renameSync(join(dir, `${next}.answer.tmp`), join(dir, `${next}.answer`));
  next += 1;
  setImmediate(answerNext);
}

process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
answerNext();
