import type { Hook } from '@oclif/core';
import { renderReport } from '../cli/report.js';
import { LicenseServerError } from '../lib/errors.js';

/**
 * An unknown command is reported like every other error (`Error: ... (COMMAND_NOT_FOUND)`,
 * a `Try:` line, exit 2, or the JSON error with --json) instead of oclif's own banner. The
 * hint lists the commands of the topic when the first word names one.
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
  const error = new LicenseServerError('COMMAND_NOT_FOUND', `unknown command ${JSON.stringify(spaced(id))}`, { hint });
  const output = renderReport(error, (argv ?? []).includes('--json'));
  if (output.stdout) process.stdout.write(output.stdout);
  if (output.stderr) process.stderr.write(output.stderr);
  process.exitCode = error.exitCode;
  return true;
};

export default hook;
