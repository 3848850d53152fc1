/**
 * One-line errors for mistakes on the command line. Commander (14.0.3, lib/command.js:
 * `unknownCommand` and `unknownOption`) writes `error: unknown command 'x'` and puts its suggestion
 * from lib/suggestSimilar.js on a line of its own, `\n(Did you mean y?)`; `error()` then prints the
 * whole help when `showHelpAfterError()` is on. The lab folds all of that into one line that names
 * the command, keeps the suggestion and says where the help is.
 */
export function oneLineError(commandPath: string, commanderMessage: string): string {
  const text = commanderMessage
    .trim()
    .replace(/^error: /, '')
    .replace(/\s*\n\(Did you mean (.*)\?\)$/, ' (did you mean $1?)')
    .replace(/\s*\n\s*/g, ' ')
    .replace(/\.$/, '');
  return `${commandPath}: ${text}; see ${commandPath} --help\n`;
}
