/**
 * Reading container command lines the way a shell would, far enough to find which program runs
 * and with which flags. Manifests written by hand often wrap the real command in
 * `sh -c "pip install ... && vllm-router ..."`, so the script is split into its simple commands.
 */

const SHELLS = new Set(['sh', 'bash', 'ash', 'dash', 'zsh']);

/** The program name without its directory: `/usr/bin/vllm` -> `vllm`. */
export function programName(word: string | undefined): string {
  return word === undefined ? '' : word.slice(word.lastIndexOf('/') + 1);
}

/** The script of `sh -c '<script>'`, and its index in argv; undefined when argv is not a shell. */
export function shellScript(argv: readonly string[]): { script: string; index: number } | undefined {
  if (!SHELLS.has(programName(argv[0]))) return undefined;
  // `-c`, `-ec`, `-lc`, `-euxc`: any short-option cluster containing c.
  const flag = argv.findIndex((word, i) => i > 0 && /^-[a-z]*c[a-z]*$/.test(word));
  if (flag < 0 || flag + 1 >= argv.length) return undefined;
  return { script: argv[flag + 1], index: flag + 1 };
}

/**
 * Splits a shell script into simple commands (on `&&`, `||`, `;`, `|`, `&` and newlines), each
 * a list of words with quotes removed. Leading `exec` and `VAR=value` assignments are dropped so
 * the first word is the program. Expansions are left as written.
 */
export function shellCommands(script: string): string[][] {
  const commands: string[][] = [];
  let words: string[] = [];
  let word = '';
  let inWord = false;
  const endWord = () => {
    if (inWord) words.push(word);
    word = '';
    inWord = false;
  };
  const endCommand = () => {
    endWord();
    if (words.length > 0) commands.push(words);
    words = [];
  };
  for (let i = 0; i < script.length; i++) {
    const c = script[i];
    if (c === "'") {
      const end = script.indexOf("'", i + 1);
      const stop = end < 0 ? script.length : end;
      word += script.slice(i + 1, stop);
      inWord = true;
      i = stop;
    } else if (c === '"') {
      inWord = true;
      for (i++; i < script.length && script[i] !== '"'; i++) {
        if (script[i] === '\\' && '"\\$`'.includes(script[i + 1] ?? '')) i++;
        word += script[i];
      }
    } else if (c === '\\') {
      if (script[i + 1] === '\n')
        i++; // line continuation
      else {
        word += script[i + 1] ?? '';
        inWord = true;
        i++;
      }
    } else if (c === '#' && !inWord) {
      while (i + 1 < script.length && script[i + 1] !== '\n') i++;
    } else if (';&|\n'.includes(c)) {
      endCommand();
      if ((c === '&' || c === '|') && script[i + 1] === c) i++;
    } else if (c === ' ' || c === '\t' || c === '\r') {
      endWord();
    } else {
      word += c;
      inWord = true;
    }
  }
  endCommand();
  return commands.map(stripPrelude).filter((command) => command.length > 0);
}

function stripPrelude(words: string[]): string[] {
  let start = 0;
  while (start < words.length && (words[start] === 'exec' || /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[start]))) {
    start++;
  }
  return words.slice(start);
}

/**
 * The values given to a flag: `--flag=v` gives [v]; `--flag a b` gives every following word up
 * to the next option ([] for a bare boolean flag). Undefined when the flag is absent. Repeated
 * flags accumulate.
 */
export function flagValues(words: readonly string[], flag: string): string[] | undefined {
  let values: string[] | undefined;
  for (let i = 0; i < words.length; i++) {
    const word = words[i];
    if (word.startsWith(`${flag}=`)) {
      values = [...(values ?? []), word.slice(flag.length + 1)];
    } else if (word === flag) {
      values = values ?? [];
      for (let j = i + 1; j < words.length && !words[j].startsWith('-'); j++) values.push(words[j]);
    }
  }
  return values;
}

/** The first value of the first of these flags that is present (`--log-level` or `-l`). */
export function flagValue(words: readonly string[], ...flags: string[]): string | undefined {
  for (const flag of flags) {
    const values = flagValues(words, flag);
    if (values !== undefined) return values[0];
  }
  return undefined;
}

export function hasFlag(words: readonly string[], flag: string): boolean {
  return flagValues(words, flag) !== undefined;
}

/** Whether a boolean flag is on: present bare or `=true`; `--flag=false` is off. */
export function flagIsOn(words: readonly string[], flag: string): boolean | undefined {
  const values = flagValues(words, flag);
  if (values === undefined) return undefined;
  const value = values.at(-1)?.toLowerCase();
  return value === undefined || !['false', '0', 'no'].includes(value);
}
