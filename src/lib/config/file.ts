import { readFile } from 'node:fs/promises';
import { LicenseServerError } from '../errors.js';
import { describe } from '../validate.js';
import { describeFsError } from '../fs-errors.js';
import { SETTINGS } from './schema.js';

/**
 * Reads config.yaml into a map from dotted key to raw YAML value. Unknown keys, duplicate
 * keys and anything but a mapping of mappings are refused, naming the key and the file.
 * Parse errors quote only the parser's one-line reason and position, never the file's text,
 * because the file may hold secrets.
 */
export async function readConfigFile(file: string): Promise<Map<string, unknown>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new LicenseServerError('CONFIG_FILE_UNREADABLE', `cannot read the configuration file ${file}: ${describeFsError(error)}`);
  }
  const data = await parseYaml(text, file);
  const values = new Map<string, unknown>();
  if (data === null || data === undefined) return values;
  if (!isPlainObject(data)) {
    throw new LicenseServerError('CONFIG_PARSE_ERROR', `the configuration file ${file} must hold a YAML mapping`);
  }
  flatten(data, '', values, file);
  return values;
}

// The yaml package is loaded only when a configuration file exists: most runs have none,
// and every command resolves its configuration before doing anything else.
async function parseYaml(text: string, file: string): Promise<unknown> {
  const { parseDocument } = await import('yaml');
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false });
  const problem = doc.errors[0];
  if (problem) {
    const firstLine = (problem.message.split('\n')[0] ?? problem.code).replace(/ at line \d+, column \d+.*$/, '');
    const offset = problem.pos[0];
    const before = text.slice(0, offset);
    const line = before.split('\n').length;
    const column = offset - before.lastIndexOf('\n');
    const where = ` at line ${line}, column ${column}`;
    throw new LicenseServerError('CONFIG_PARSE_ERROR', `malformed YAML in ${file}${where}: ${firstLine}`);
  }
  return doc.toJS();
}

const KNOWN = new Set(SETTINGS.map((spec) => spec.key));
// Every proper prefix of a dotted key: `notifications` and `notifications.smtp` alike.
const SECTIONS = new Set(SETTINGS.flatMap((spec) => spec.key.split('.').slice(0, -1).map((_, i, parts) => parts.slice(0, i + 1).join('.'))));

function flatten(data: Record<string, unknown>, prefix: string, out: Map<string, unknown>, file: string): void {
  for (const [name, value] of Object.entries(data)) {
    const key = prefix + name;
    if (SECTIONS.has(key)) {
      if (value === null) continue;
      if (!isPlainObject(value)) {
        throw new LicenseServerError('CONFIG_INVALID_VALUE', `${key} must be a mapping of settings (in ${file})`);
      }
      flatten(value, `${key}.`, out, file);
      continue;
    }
    if (!KNOWN.has(key)) {
      const known = [...KNOWN].filter((candidate) => candidate.startsWith(prefix)).join(', ');
      throw new LicenseServerError('CONFIG_UNKNOWN_KEY', `unknown key ${describe(key)} in ${file} (known keys: ${known})`);
    }
    out.set(key, value);
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);
}
