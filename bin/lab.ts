#!/bin/sh
":" //; exec node "$(dirname "$(readlink -f "$0")")/launch.mjs" "$@"
// The two lines above make this file runnable from anywhere: /bin/sh runs `:` (nothing), then
// execs node on bin/launch.mjs, which starts this file from a cached bundle or through tsx, both
// resolved from this repository; to TypeScript the line is a string and a comment. Node >= 20
// (README: Node versions). The formatter leaves this file alone (biome.json): it would end the
// string with a semicolon, and the shell would then run `//`.
import { runLab } from '../lib/cli/program.ts';

process.exitCode = await runLab(process.argv.slice(2));
