import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderTemplate } from '../../../src/lib/notifications/render.js';
import { EVENTS } from '../../../src/lib/notifications/events.js';
import { DEFAULT_EMAIL_TEMPLATES, renderEmail } from '../../../src/lib/notifications/templates.js';

const docs = readFileSync(fileURLToPath(new URL('../../../docs/notifications.md', import.meta.url)), 'utf8');

/** The default subject and body docs/notifications.md gives under `#### \`EVENT\``. */
function documentedDefault(event: string): { subject: string; body: string } {
  const start = docs.indexOf(`#### \`${event}\`\n`);
  assert.notEqual(start, -1, `docs/notifications.md has no section for ${event}`);
  const next = docs.slice(start + 1).search(/\n###/);
  const section = docs.slice(start, next === -1 ? undefined : start + 1 + next);
  const match = /subject `(.*?)`, body `(.*)`/.exec(section);
  assert.ok(match, `the section of ${event} gives no default email`);
  return { subject: match[1]!, body: match[2]!.replace(/\\n/g, '\n') };
}

const event = (name: string, data: Record<string, unknown>) => ({ id: 'e', event: name, occurred_at: '2026-11-22T02:00:00.000Z', server: 'licenses.example.com', data });

describe('email templates', () => {
  it('are the defaults docs/notifications.md gives for every event', () => {
    for (const name of EVENTS) assert.deepEqual(documentedDefault(name), DEFAULT_EMAIL_TEMPLATES[name], name);
  });

  it('name a license by its key prefix, which the customer knows, never by its internal id', () => {
    for (const [name, template] of Object.entries(DEFAULT_EMAIL_TEMPLATES)) {
      assert.doesNotMatch(`${template.subject}\n${template.body}`, /\{\{\s*license_id\b/, name);
      if (name.startsWith('license.') || name.startsWith('machine.') || name === 'usage.threshold') assert.match(template.body, /\{\{license_key_prefix\}\}/, name);
    }
  });

  it('give a count its noun: {{name|one|other}}', () => {
    const render = (data: Record<string, unknown>) => renderTemplate('allows {{n|machine|machines}}; {{ r | new machine was | new machines were }} refused', event('machine.limit_exceeded', data));
    assert.equal(render({ n: 1, r: 1 }), 'allows 1 machine; 1 new machine was refused');
    assert.equal(render({ n: 3, r: 4 }), 'allows 3 machines; 4 new machines were refused');
    assert.equal(render({ n: 0, r: '1' }), 'allows 0 machines; 1 new machine was refused');
    assert.equal(render({ n: 1.5, r: null }), 'allows 1.5 machines;  refused');
    assert.equal(renderTemplate('{{n}} and {{missing|a|b}}.', event('x', { n: 2 })), '2 and .');
  });

  it('read right for one machine and one day left', () => {
    const limit = renderEmail([], event('machine.limit_exceeded', { license_id: 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d', license_key_prefix: '7KQ2-M9X', customer_name: 'Acme GmbH', max_machines: 1, refused_count: 1, hardware_id: 'HW-9' }));
    assert.equal(limit.subject, '[licenses.example.com] Machine limit reached on license 7KQ2-M9X...');
    assert.equal(limit.text, 'License 7KQ2-M9X... of Acme GmbH allows 1 machine; 1 new machine was refused, the last one HW-9.');
    const expiring = renderEmail([], event('license.expiring_soon', { license_id: 'c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d', license_key_prefix: '7KQ2-M9X', customer_name: 'Acme GmbH', valid_until: '2027-01-01T00:00:00.000Z', days_left: 1, window_days: 1 }));
    assert.equal(expiring.subject, 'Your license expires in 1 day');
    assert.equal(expiring.text, 'Dear Acme GmbH,\n\nyour license with the key 7KQ2-M9X... expires at 2027-01-01T00:00:00.000Z, in 1 day. Please renew it in time to keep using the software.');
  });
});
