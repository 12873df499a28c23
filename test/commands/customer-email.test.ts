import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ok, runCli } from '../support/cli.js';

describe('customer contact email: customer create/update --email (issue 25)', function () {
  this.timeout(60_000);
  let work: string;
  let env: Record<string, string>;
  const cli = (...args: string[]) => runCli(args, { cwd: work, env });

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-customer-email-'));
    env = { LICENSE_DATA_DIR: path.join(work, 'data') };
    ok(await cli('init'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('is set at creation, changed and removed by update, and shown by show, list and --json', async () => {
    const created = ok(await cli('customer', 'create', '--name', 'Initech', '--email', 'billing@initech.example', '--json')).json();
    assert.equal(created.email, 'billing@initech.example');
    const bare = ok(await cli('customer', 'create', '--name', 'Bare', '--json')).json();
    assert.equal(bare.email, null);
    assert.match(ok(await cli('customer', 'show', created.id)).stdout, /email:\s+billing@initech\.example/);
    assert.match(ok(await cli('customer', 'list')).stdout, /EMAIL[\s\S]*billing@initech\.example/);
    const changed = ok(await cli('customer', 'update', created.id, '--email', 'ap@initech.example', '--json')).json();
    assert.equal(changed.email, 'ap@initech.example');
    assert.equal(changed.name, 'Initech');
    const removed = ok(await cli('customer', 'update', created.id, '--email', '', '--json')).json();
    assert.equal(removed.email, null);
    const audit = ok(await cli('audit', 'list', '--action', 'customer.updated', '--json')).json();
    assert.equal(audit.length, 2);
  });

  it('refuses anything but one plain address, and changes nothing', async () => {
    const customer = ok(await cli('customer', 'create', '--name', 'Hooli', '--email', 'ops@hooli.example', '--json')).json();
    const bad = [
      'ops@hooli.example\r\nBcc: victim@example.com',
      'ops@hooli.example\nX: y',
      'a@b.example, c@d.example',
      'Ops <ops@hooli.example>',
      'no-at-sign',
      `${'a'.repeat(310)}@example.com`,
      'two@@example.com',
    ];
    for (const email of bad) {
      const create = await cli('customer', 'create', '--name', 'X', '--email', email);
      assert.equal(create.code, 2, `create --email ${JSON.stringify(email)}: ${create.stderr}`);
      assert.match(create.stderr, /INVALID_INPUT|one plain address/);
      const update = await cli('customer', 'update', customer.id, '--email', email);
      assert.equal(update.code, 2, `update --email ${JSON.stringify(email)}`);
    }
    assert.equal(ok(await cli('customer', 'show', customer.id, '--json')).json().email, 'ops@hooli.example');
    assert.equal(ok(await cli('customer', 'list', '--json')).json().filter((c: { name: string }) => c.name === 'X').length, 0);
  });
});
