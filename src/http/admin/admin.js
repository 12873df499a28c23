// The admin page: plain DOM, no framework, no CDN. Every value from the server is
// rendered with textContent, never as HTML. The admin token lives in this tab's
// sessionStorage and goes out only in the Authorization header of same-origin requests.
const TOKEN_KEY = 'license-server-admin-token';
const $ = (selector) => document.querySelector(selector);

/** The signed-in token's scopes (GET /api/whoami); the page shows only what they allow. */
let scopes = [];
const may = (scope) => scopes.includes('admin') || scopes.includes(scope);

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

function say(text, error = false) {
  const status = $('#status');
  status.textContent = text;
  status.classList.toggle('error', error);
}

async function call(method, path, { body, accept } = {}) {
  const headers = { authorization: `Bearer ${token()}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (accept) headers.accept = accept;
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (response.status === 401) {
    signOut('The token was not accepted.');
    throw new Error('unauthorized');
  }
  if (!response.ok) {
    const problem = await response.json().catch(() => ({}));
    throw new Error(problem.error ? `${problem.error.message} (${problem.error.code})` : `HTTP ${response.status}`);
  }
  return response;
}

/**
 * Text from clients (hardware IDs, machine names) and token names as they can be shown: the
 * characters that change how text looks without being seen (bidirectional controls such as
 * U+202E, zero-width and format characters, default-ignorables, line separators) written as
 * escapes, so that one hardware ID cannot pass for another. The same set as escapeInvisible
 * in src/lib/validate.ts.
 */
const INVISIBLE = /[\p{Cf}\p{Default_Ignorable_Code_Point}\p{Bidi_Control}\p{Zl}\p{Zp}]/gu;
function visible(text) {
  if (text === null || text === undefined) return text;
  return String(text).replace(INVISIBLE, (char) => {
    const point = char.codePointAt(0);
    return point > 0xffff ? `\\u{${point.toString(16)}}` : `\\u${point.toString(16).padStart(4, '0')}`;
  });
}

/** A table cell; `value` for a timestamp or size, which must not wrap (admin.css). */
function cell(row, text, kind) {
  const td = document.createElement('td');
  td.textContent = text ?? '-';
  if (kind === 'value') td.className = 'value';
  row.append(td);
  return td;
}

function button(label, onClick) {
  const element = document.createElement('button');
  element.type = 'button';
  element.textContent = label;
  element.addEventListener('click', onClick);
  return element;
}

function size(bytes) {
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

/** Saves a response body as a file, the name taken from Content-Disposition. */
async function save(response, fallback) {
  const disposition = response.headers.get('content-disposition') ?? '';
  const name = /filename="([^"]+)"/.exec(disposition)?.[1] ?? fallback;
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** The next page of a list answer (its `Link: <...>; rel="next"` header), or null on the last page. */
function nextPage(response) {
  const link = response.headers.get('link');
  const match = link ? /<([^>]+)>\s*;\s*rel="next"/.exec(link) : null;
  return match ? match[1] : null;
}

/**
 * Shows a list's "More" button while the server announces a next page; a click loads that
 * page (the server's own URL, filters and cursor included) below the rows already shown.
 */
function offerMore(selector, next, load, what) {
  const more = $(selector);
  more.hidden = next === null;
  more.onclick = next === null ? null : (event) => busy(event.currentTarget, `Loading more ${what}…`, async () => {
    await load(next);
    return `Loaded more ${what}.`;
  });
}

/** Runs `work` with the button disabled and a status line, reporting the outcome. */
async function busy(control, message, work) {
  control.disabled = true;
  control.setAttribute('aria-busy', 'true');
  say(message);
  try {
    const done = await work();
    if (done) say(done);
  } catch (error) {
    if (error.message !== 'unauthorized') say(error.message, true);
  } finally {
    control.disabled = false;
    control.removeAttribute('aria-busy');
  }
}

async function loadBackups(page) {
  const response = await call('GET', page ?? '/api/backups');
  const { backups, scheduler } = await response.json();
  offerMore('#more-backups', nextPage(response), loadBackups, 'backups');
  const body = $('#backup-table tbody');
  if (page === undefined) body.replaceChildren();
  const facts = $('#scheduler');
  facts.replaceChildren();
  const fact = (term, value) => {
    const dt = document.createElement('dt');
    dt.textContent = term;
    const dd = document.createElement('dd');
    dd.textContent = value;
    facts.append(dt, dd);
  };
  fact('Automatic backups', scheduler.enabled ? `on (${scheduler.schedule})` : 'off');
  if (scheduler.enabled) {
    fact('Next run', scheduler.next_run ?? '-');
    const last = scheduler.last_run;
    fact('Last run', last ? `${last.slot}: ${last.status}${last.error ? ` (${last.error})` : ''}` : 'none yet');
  }
  for (const backup of backups) {
    const row = document.createElement('tr');
    row.dataset.backupId = backup.backup_id;
    cell(row, backup.backup_id);
    cell(row, backup.created_at, 'value');
    cell(row, size(backup.size), 'value');
    cell(row, backup.engine);
    cell(row, String(backup.schema_version));
    cell(row, backup.encrypted ? 'yes' : 'no');
    cell(row, backup.trigger);
    const actions = document.createElement('div');
    actions.className = 'row-actions';
    if (may('backups')) actions.append(
      downloadButton(backup),
      button('Validate', (event) =>
        busy(event.currentTarget, `Validating ${backup.backup_id}…`, async () => {
          const report = await (await call('POST', `/api/backups/${encodeURIComponent(backup.backup_id)}/validate`)).json();
          return `Backup ${report.backup_id} is valid: ${report.checks.map((check) => `${check.check}: ${check.detail}`).join('; ')}.`;
        }),
      ),
    );
    if (may('restore')) actions.append(button('Restore…', () => openRestore(backup.backup_id)));
    cell(row, '').replaceChildren(actions);
    body.append(row);
  }
  if (backups.length === 0 && page === undefined) {
    const row = document.createElement('tr');
    cell(row, 'No backups yet.').colSpan = 8;
    body.append(row);
  }
  if (page === undefined) await loadPlaces();
}

/** Local storage and each off-site target: the newest good backup there, read from the place itself. */
async function loadPlaces() {
  const { places } = await (await call('GET', '/api/backups/status')).json();
  const body = $('#place-table tbody');
  body.replaceChildren();
  for (const place of places) {
    const row = document.createElement('tr');
    row.dataset.place = place.place;
    cell(row, place.place);
    cell(row, place.location);
    cell(row, place.newest_backup_id ?? (place.unreachable ? 'cannot be read' : 'none'));
    cell(row, place.age_seconds === null ? '-' : age(place.age_seconds), 'value');
    cell(row, String(place.count), 'value');
    cell(row, size(place.bytes), 'value');
    cell(row, place.unreachable ?? place.last_error ?? '');
    const actions = document.createElement('div');
    actions.className = 'row-actions';
    if (place.kind !== 'local') {
      actions.append(button('Show backups', (event) =>
        busy(event.currentTarget, `Listing the backups on ${place.place}…`, async () => {
          const count = await loadTargetBackups(place.place);
          return `${count} backup(s) on ${place.place}.`;
        }),
      ));
    }
    cell(row, '').replaceChildren(actions);
    body.append(row);
  }
}

/** What one target holds, each with "Restore from target…" (a fresh host's way back). */
async function loadTargetBackups(target) {
  const { backups } = await (await call('GET', `/api/backups?target=${encodeURIComponent(target)}&limit=100`)).json();
  $('#target-backups').hidden = false;
  $('#target-name').textContent = target;
  const body = $('#target-backup-table tbody');
  body.replaceChildren();
  for (const backup of backups) {
    const row = document.createElement('tr');
    row.dataset.backupId = backup.backup_id;
    cell(row, backup.backup_id);
    cell(row, backup.created_at, 'value');
    cell(row, size(backup.size), 'value');
    cell(row, backup.engine);
    cell(row, backup.encrypted ? 'yes' : 'no');
    const actions = document.createElement('div');
    actions.className = 'row-actions';
    if (may('restore')) actions.append(button('Restore from target…', () => openRestore(backup.backup_id, target)));
    cell(row, '').replaceChildren(actions);
    body.append(row);
  }
  if (backups.length === 0) {
    const row = document.createElement('tr');
    cell(row, 'No backups on this target.').colSpan = 6;
    body.append(row);
  }
  return backups.length;
}

/** 26h 5m, 3d 2h: to compare with a maximum age at a glance. */
function age(seconds) {
  const days = Math.floor(seconds / 86400);
  const hours = Math.floor((seconds % 86400) / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  if (days > 0) return `${days}d ${hours}h`;
  if (hours > 0) return `${hours}h ${minutes}m`;
  return `${minutes}m ${seconds % 60}s`;
}

/**
 * An unencrypted archive is the whole database in the clear, so only an admin token may
 * download it (the server refuses others with BACKUP_UNENCRYPTED); the button says so.
 */
function downloadButton(backup) {
  const download = button(backup.encrypted ? 'Download' : 'Download (admin only)', (event) =>
    busy(event.currentTarget, `Downloading ${backup.backup_id}…`, async () => {
      await save(await call('GET', `/api/backups/${encodeURIComponent(backup.backup_id)}/download`), backup.file);
      return `Downloaded ${backup.file}.`;
    }),
  );
  if (!backup.encrypted) {
    download.title = 'Not encrypted: this archive holds the private signing key (unless sealed), every license key and every license\'s decryption key in the clear, so only an admin token may download it. Set backup.encryption_key to encrypt backups.';
    download.disabled = !may('admin');
  }
  return download;
}

function openRestore(id, target) {
  const form = $('#restore-form');
  form.hidden = false;
  form.dataset.backupId = id;
  form.dataset.target = target ?? '';
  $('#restore-id').textContent = id;
  $('#restore-from').textContent = target ? ` from target ${target}` : '';
  $('#restore-confirm').value = '';
  $('#restore-confirm').focus();
  // Another server's keys and tokens replace this one's only when this box, off by default,
  // is ticked: the restore's own confirmation (the id typed) never covers them.
  $('#restore-replace-keys').checked = false;
  $('#restore-replace-keys').disabled = !may('admin');
  $('#restore-replace-keys-label').hidden = true;
  // The dry run rehearses the restore: what it would do to the signing keys, or why it would fail.
  $('#restore-preview').textContent = 'Checking the backup…';
  call('POST', `/api/backups/${encodeURIComponent(id)}/restore`, { body: { dry_run: true, ...(target ? { target } : {}) } })
    .then((response) => response.json())
    .then((preview) => {
      if (form.dataset.backupId !== id) return;
      $('#restore-preview').textContent = describeSigningKeys(preview.signing_keys, 'would');
      $('#restore-replace-keys-label').hidden = !preview.signing_keys?.another_server;
    })
    .catch((error) => {
      if (form.dataset.backupId === id && error.message !== 'unauthorized') $('#restore-preview').textContent = `The restore would fail: ${error.message}`;
    });
}

/** The signing keys a restore changes (or would), as the CLI words them. */
function describeSigningKeys(keys, mood) {
  if (!keys) return '';
  const foreign = keys.another_server
    ? `This backup is another server's (it shares no signing key with this one): its signing keys and admin tokens ${mood === 'would' ? 'would replace' : 'replaced'} this server's. `
    : '';
  const changes = keys.changes.map((k) => `key ${k.key_id}: ${k.after ?? 'removed from the key set'} (before: ${k.before ?? 'not in the store'}; in the backup: ${k.backup ?? 'not in it'})`);
  return `${foreign}${changes.length ? `Signing keys${mood === 'would' ? ' that would change' : ' changed'}: ${changes.join('; ')}.` : ''}`;
}

/** License key prefixes by license id, from the pages of licenses loaded: machines name their license by it. */
const licensePrefixes = new Map();

/** The first page of licenses (and of machines), or with `page` the next one below them. */
async function loadLicenses(page) {
  const response = await call('GET', page ?? '/api/licenses');
  const licenses = await response.json();
  for (const license of licenses) licensePrefixes.set(license.id, license.key_prefix);
  const body = $('#license-table tbody');
  if (page === undefined) body.replaceChildren();
  for (const license of licenses) {
    const row = document.createElement('tr');
    row.dataset.licenseId = license.id;
    cell(row, `${license.key_prefix}…`);
    cell(row, license.customer_name);
    cell(row, license.type);
    cell(row, license.active ? 'yes' : 'no');
    cell(row, license.valid_until, 'value');
    cell(row, `${license.machines_in_use}${license.max_machines === null ? '' : ` of ${license.max_machines}`}${license.floating ? ' (floating)' : ''}`);
    if (!may('licenses')) {
      body.append(row);
      continue;
    }
    const form = document.createElement('form');
    const ttlId = `ttl-${license.id}`;
    const hwId = `hw-${license.id}`;
    const ttlLabel = Object.assign(document.createElement('label'), { htmlFor: ttlId, textContent: 'TTL (days)' });
    const ttl = Object.assign(document.createElement('input'), { id: ttlId, type: 'number', min: '1', max: '365', value: '30', required: true });
    const hwLabel = Object.assign(document.createElement('label'), { htmlFor: hwId, textContent: 'Hardware ID' });
    const hardware = Object.assign(document.createElement('input'), { id: hwId, autocomplete: 'off', required: license.has_decryption_key || license.max_machines !== null });
    const submit = Object.assign(document.createElement('button'), { type: 'submit', textContent: 'Download .lic' });
    const ttlBox = document.createElement('div');
    ttlBox.append(ttlLabel, ttl);
    const hwBox = document.createElement('div');
    hwBox.append(hwLabel, hardware);
    form.append(ttlBox, hwBox, submit);
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      busy(submit, 'Checking out…', async () => {
        const body = { ttl_days: Number(ttl.value) };
        if (hardware.value) body.hardware_id = hardware.value;
        const response = await call('POST', `/api/licenses/${encodeURIComponent(license.id)}/checkout`, { body, accept: 'application/octet-stream' });
        await save(response, 'license.lic');
        // The checkout made (or renewed) a machine's seat: the counts and the machines changed.
        await loadLicenses();
        return 'License file downloaded.';
      });
    });
    cell(row, '').replaceChildren(form);
    body.append(row);
  }
  // Offered once the rows are in, so that "More" never stands above a page still loading.
  offerMore('#more-licenses', nextPage(response), loadLicenses, 'licenses');
  if (page === undefined) await loadMachines();
}

async function loadMachines(page) {
  const response = await call('GET', page ?? '/api/machines');
  const machines = await response.json();
  offerMore('#more-machines', nextPage(response), loadMachines, 'machines');
  const body = $('#machine-table tbody');
  if (page === undefined) body.replaceChildren();
  for (const machine of machines) {
    const row = document.createElement('tr');
    row.dataset.machineId = machine.id;
    cell(row, `${licensePrefixes.get(machine.license_id) ?? machine.license_id}…`);
    cell(row, visible(machine.hardware_id));
    cell(row, visible(machine.name));
    cell(row, machine.active ? 'yes' : 'no');
    cell(row, machine.holds_seat ? 'yes' : 'no');
    cell(row, machine.last_seen, 'value');
    cell(row, machine.offline_until, 'value');
    const actions = document.createElement('div');
    actions.className = 'row-actions';
    if (may('licenses')) {
      const verb = machine.active ? 'deactivate' : 'activate';
      actions.append(button(machine.active ? 'Deactivate' : 'Activate', (event) =>
        busy(event.currentTarget, `${machine.active ? 'Deactivating' : 'Activating'} ${visible(machine.hardware_id)}…`, async () => {
          const change = await (await call('POST', `/api/machines/${encodeURIComponent(machine.id)}/${verb}`, { body: {} })).json();
          await show();
          return [`Machine ${visible(machine.hardware_id)} ${verb}d.`, ...change.warnings.map(visible)].join(' ');
        }),
      ));
    }
    cell(row, '').replaceChildren(actions);
    body.append(row);
  }
  if (machines.length === 0 && page === undefined) {
    const row = document.createElement('tr');
    cell(row, 'No machines yet.').colSpan = 8;
    body.append(row);
  }
}

/** The first page of deliveries (only failed ones while the box is ticked), or with `page` the next one below them. */
async function loadDeliveries(page) {
  const failedOnly = $('#deliveries-failed').checked;
  const response = await call('GET', page ?? `/api/notifications/deliveries${failedOnly ? '?status=failed' : ''}`);
  const deliveries = await response.json();
  const body = $('#delivery-table tbody');
  if (page === undefined) body.replaceChildren();
  for (const delivery of deliveries) {
    const row = document.createElement('tr');
    row.dataset.deliveryId = delivery.id;
    cell(row, delivery.id);
    cell(row, delivery.event);
    cell(row, `${delivery.channel} ${visible(delivery.target)}`);
    cell(row, delivery.status);
    cell(row, String(delivery.attempts), 'value');
    cell(row, delivery.last_error !== null ? visible(delivery.last_error) : delivery.last_status !== null ? `HTTP ${delivery.last_status}` : '-');
    cell(row, delivery.created_at, 'value');
    const actions = document.createElement('div');
    actions.className = 'row-actions';
    // A redelivery sends an event's data out again: notifications are the admin scope's.
    if (may('admin')) {
      actions.append(button('Redeliver', (event) =>
        busy(event.currentTarget, `Redelivering ${delivery.id}…`, async () => {
          const again = await (await call('POST', `/api/notifications/deliveries/${encodeURIComponent(delivery.id)}/redeliver`, { body: {} })).json();
          await loadDeliveries();
          return `Delivery ${again.id} is ${again.status} again: the server sends it to ${again.channel} ${visible(again.target)} within a few seconds.`;
        }),
      ));
    }
    cell(row, '').replaceChildren(actions);
    body.append(row);
  }
  if (deliveries.length === 0 && page === undefined) {
    const row = document.createElement('tr');
    cell(row, failedOnly ? 'No failed deliveries.' : 'No deliveries yet.').colSpan = 8;
    body.append(row);
  }
  offerMore('#more-deliveries', nextPage(response), loadDeliveries, 'deliveries');
}

async function loadSigningKey() {
  const [{ public_key_pem: pem }, { keys }] = await Promise.all([
    (await call('GET', '/api/signing-key')).json(),
    (await call('GET', '/api/signing-keys')).json(),
  ]);
  $('#pem').textContent = pem;
  const body = $('#key-table tbody');
  body.replaceChildren();
  for (const key of keys) {
    const row = document.createElement('tr');
    row.dataset.keyId = key.key_id;
    cell(row, key.key_id);
    cell(row, key.state);
    cell(row, key.created_at, 'value');
    cell(row, key.fingerprint);
    body.append(row);
  }
  // The same text as `signing-key show --all`, which license verify --public-key and the client read.
  $('#key-set').textContent = keys.map((key) => `# key_id ${key.key_id} ${key.state}\n${key.public_key_pem}`).join('');
}

async function show() {
  let signedIn = Boolean(token());
  if (signedIn) {
    try {
      scopes = (await (await call('GET', '/api/whoami')).json()).scopes;
    } catch (error) {
      if (error.message !== 'unauthorized') say(error.message, true);
      signedIn = Boolean(token());
      scopes = [];
    }
  }
  $('#sign-in').hidden = signedIn;
  $('#nav').hidden = !signedIn;
  // What the token cannot do is not shown at all, rather than shown and refused.
  const visible = { '#backups': may('backups'), '#licenses': may('read'), '#machines': may('read'), '#deliveries': may('read'), '#signing-key': may('read') };
  for (const [id, allowed] of Object.entries(visible)) {
    $(id).hidden = !signedIn || !allowed;
    $(`#nav a[href="${id}"]`).hidden = !signedIn || !allowed;
  }
  $('#create-backup').hidden = !may('backups');
  for (const header of document.querySelectorAll('.needs-licenses')) header.hidden = !may('licenses');
  if (!signedIn) return;
  try {
    await Promise.all([
      may('backups') ? loadBackups() : undefined,
      may('read') ? loadLicenses() : undefined,
      may('read') ? loadDeliveries() : undefined,
      may('read') ? loadSigningKey() : undefined,
    ]);
  } catch (error) {
    if (error.message !== 'unauthorized') say(error.message, true);
  }
}

/**
 * Drops everything the last token was shown: hidden sections would otherwise keep its rows in
 * the page, and the next token, maybe one with fewer scopes, would see its buttons until its
 * own lists arrive.
 */
function forget() {
  for (const body of document.querySelectorAll('table tbody')) body.replaceChildren();
  for (const more of document.querySelectorAll('[id^="more-"]')) {
    more.hidden = true;
    more.onclick = null;
  }
  $('#pem').textContent = '';
  $('#key-set').textContent = '';
  $('#target-backups').hidden = true;
  $('#restore-form').hidden = true;
  licensePrefixes.clear();
}

function signOut(message = 'Signed out.') {
  sessionStorage.removeItem(TOKEN_KEY);
  forget();
  say(message, message !== 'Signed out.');
  show();
  $('#token').focus();
}

document.addEventListener('DOMContentLoaded', () => {
  $('#sign-in-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $('#token').value.trim());
    $('#token').value = '';
    try {
      await call('GET', '/api/whoami');
      say('Signed in.');
      await show();
    } catch (error) {
      if (error.message !== 'unauthorized') say(error.message, true);
    }
  });
  $('#sign-out').addEventListener('click', () => signOut());
  $('#create-backup').addEventListener('click', (event) =>
    busy(event.currentTarget, 'Creating a backup… (this can take a while for a large database)', async () => {
      const backup = await (await call('POST', '/api/backups')).json();
      await loadBackups();
      const copies = backup.copies === 'pending' ? ' It is being copied to the off-site targets.' : '';
      return `Created backup ${backup.backup_id}.${copies}${backup.warning ? ` Warning: ${backup.warning}` : ''}`;
    }),
  );
  $('#deliveries-failed').addEventListener('change', (event) => {
    const box = event.currentTarget;
    busy(box, 'Loading deliveries…', async () => {
      await loadDeliveries();
      return box.checked ? 'Showing failed deliveries.' : 'Showing all deliveries.';
    });
  });
  $('#restore-cancel').addEventListener('click', () => {
    $('#restore-form').hidden = true;
  });
  $('#restore-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    const id = form.dataset.backupId;
    const typed = $('#restore-confirm').value.trim();
    if (typed !== id) {
      say('The id typed does not match the backup to restore.', true);
      return;
    }
    busy(form.querySelector('button[type=submit]'), `Restoring ${id}… the server pauses for a moment.`, async () => {
      const body = {
        confirm: typed,
        keep_revocations: $('#restore-keep').checked,
        ...($('#restore-replace-keys').checked ? { replace_keys: true } : {}),
        ...(form.dataset.target ? { target: form.dataset.target } : {}),
      };
      const report = await (await call('POST', `/api/backups/${encodeURIComponent(id)}/restore`, { body })).json();
      form.hidden = true;
      await show();
      const { admin_tokens: tokens, licenses, customers, machines = [], keep } = report.revocations;
      const carried = [
        tokens.length ? ` Kept revoked: ${tokens.map((t) => `token ${visible(t.name)}`).join(', ')}.` : '',
        licenses.length + customers.length + machines.length
          ? ` ${keep ? 'Kept deactivated' : 'Active again, as in the backup'}: ${[...licenses.map((l) => `license ${l.key_prefix}`), ...customers.map((c) => `customer ${c.name}`), ...machines.map((m) => `machine ${visible(m.hardware_id)}`)].join(', ')}.`
          : '',
      ].join('');
      const engines = { sqlite: 'SQLite', postgres: 'PostgreSQL' };
      const moved = report.moved
        ? ` Moved from ${engines[report.moved.from]} to ${engines[report.moved.to]}: ${Object.values(report.moved.rows).reduce((sum, n) => sum + n, 0)} rows.`
        : '';
      const keys = describeSigningKeys(report.signing_keys, 'did');
      return `Restored backup ${report.backup_id}; the previous state is backup ${report.pre_restore_backup_id ?? 'none'}.${moved}${carried}${keys ? ` ${keys}` : ''}`;
    });
  });
  $('#copy-key-set').addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText($('#key-set').textContent);
      say('Key set copied.');
    } catch {
      $('#key-set').hidden = false;
      getSelection().selectAllChildren($('#key-set'));
      say('Select-all done: press Ctrl+C (or Cmd+C) to copy.');
    }
  });
  $('#copy-pem').addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText($('#pem').textContent);
      say('Public key copied.');
    } catch {
      getSelection().selectAllChildren($('#pem'));
      say('Select-all done: press Ctrl+C (or Cmd+C) to copy.');
    }
  });
  show();
});
