import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { SETTINGS } from '../../../src/lib/config/schema.js';

describe('docs/configuration.md', () => {
  const doc = readFileSync(new URL('../../../docs/configuration.md', import.meta.url), 'utf8');

  it('documents every setting with its variable, flag and default', () => {
    for (const spec of SETTINGS) {
      const row = doc.split('\n').find((line) => line.startsWith(`| \`${spec.key}\` | \`${spec.env}\` |`));
      assert.ok(row, `no row for ${spec.key} / ${spec.env}`);
      const cells = row.split('|').map((cell) => cell.trim());
      assert.equal(cells[3], spec.flag ? `\`--${spec.flag}\`` : '', `flag of ${spec.key}`);
      const documentedDefault = cells[5]!.replace(/`/g, '');
      const actual = spec.default ? String(spec.default('<data_dir>')) : 'unset';
      assert.equal(documentedDefault, actual, `default of ${spec.key}`);
    }
  });

  it('has no row for a setting that does not exist', () => {
    const keys = [...doc.matchAll(/^\| `([a-z_.]+)` \| `LICENSE_/gm)].map((match) => match[1]);
    assert.deepEqual(keys.sort(), SETTINGS.map((spec) => spec.key).sort());
  });
});
