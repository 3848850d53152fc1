#!/bin/sh
":" //; exec node --import "$(dirname "$(readlink -f "$0")")/register-tsx.mjs" "$0" "$@"
// The two lines above make this file runnable from anywhere: /bin/sh runs `:` (nothing), then
// execs node with tsx loaded from this repository's node_modules; to TypeScript they are a string
// and a comment. Node >= 20 (README: Node versions). The formatter leaves this file alone
// (biome.json): it would end the string with a semicolon, which the shell would run `//` after.
import { runLab } from '../lib/cli/program.ts';

process.exitCode = await runLab(process.argv.slice(2));
