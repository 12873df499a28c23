import type { Hook } from '@oclif/core';
import { renderReport } from '../cli/report.js';
import { LicenseServerError } from '../lib/errors.js';

/**
 * An unknown command is reported like every other error (`Error: ... (COMMAND_NOT_FOUND)`,
 * a `Try:` line, exit 2, or the JSON error with --json) instead of oclif's own banner. The
 * hint lists the commands of the topic when the first word names one; the message ends with
 * the nearest command when the words look like a typo of one (`licence list`).
 */
const hook: Hook<'command_not_found'> = async function ({ argv, config, id }) {
  const words = id.split(':');
  const topic = words.length > 1 ? words.slice(0, -1).join(':') : undefined;
  const siblings = topic && config.findTopic(topic)
    ? config.commandIDs.filter((candidate) => candidate.startsWith(`${topic}:`) && candidate.split(':').length === words.length).map((candidate) => candidate.split(':').pop()!)
    : [];
  const spaced = (name: string) => name.replace(/:/g, ' ');
  const hint = siblings.length > 0
    ? `The ${spaced(topic!)} commands are ${siblings.sort().join(', ')}; see \`${config.bin} ${spaced(topic!)} --help\`.`
    : `See \`${config.bin} --help\` for the commands.`;
  const suggestion = await suggestCommand(words, config);
  const error = new LicenseServerError(
    'COMMAND_NOT_FOUND',
    `unknown command ${JSON.stringify(spaced(id))}${suggestion ? `; did you mean ${JSON.stringify(spaced(suggestion))}?` : ''}`,
    { hint },
  );
  const output = renderReport(error, (argv ?? []).includes('--json'));
  if (output.stdout) process.stdout.write(output.stdout);
  if (output.stderr) process.stderr.write(output.stderr);
  process.exitCode = error.exitCode;
  return true;
};

/**
 * The visible command, alias or topic nearest to what was typed. oclif's id may carry the words
 * after the command (`licence show ID` arrives as licence:show:ID), so each command is held
 * against as many words as it has.
 */
async function suggestCommand(words: readonly string[], config: Parameters<Hook<'command_not_found'>>[0]['config']): Promise<string | undefined> {
  const { didYouMean } = await import('../cli/did-you-mean.js');
  const ids = [
    ...config.commands.filter((command) => !command.hidden).flatMap((command) => [command.id, ...command.aliases]),
    ...config.topics.filter((topic) => !topic.hidden).map((topic) => topic.name),
  ];
  const byLength = new Map<number, string[]>();
  for (const candidate of ids) {
    const length = candidate.split(':').length;
    if (length <= words.length) byLength.set(length, [...(byLength.get(length) ?? []), candidate]);
  }
  // The longest match wins: `licence list` is license list, not the topic license.
  for (const length of [...byLength.keys()].sort((a, b) => b - a)) {
    const typed = words.slice(0, length).join(':');
    // A topic typed right (`license nosuch`) is no suggestion: its commands are the hint.
    const found = didYouMean(typed, byLength.get(length)!.filter((candidate) => candidate !== typed));
    if (found) return found;
  }
  return undefined;
}

export default hook;
