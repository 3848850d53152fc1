#!/usr/bin/env -S npx tsx
import { runLab } from '../lib/cli/program.ts';

process.exitCode = await runLab(process.argv.slice(2));
