import { App } from 'aws-cdk-lib';
import { addLabStack } from '../lib/aws/cdk-app.ts';

// `-c labConfig=<file>` wins over $LAB_CONFIG; with neither, the published lab's defaults.
await addLabStack(new App());
