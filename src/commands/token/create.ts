import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { createAdminToken, parseScopes, type AdminToken } from '../../lib/admin-tokens.js';
import { parseDuration } from '../../lib/duration.js';

export default class TokenCreate extends BaseCommand<typeof TokenCreate> {
  static override description = `Create an admin API token. The token is printed once and stored only as a hash.
On a terminal it says so around the token; otherwise it prints the token alone (what a script needs, and the one thing it cannot get later; \`token list\` shows the id), so that token=$(license-server token create --name N) works. --json gives the record with the token.`;
  static override flags = {
    name: Flags.string({ description: 'A unique name, never reused, recorded as the actor of what the token does.' }),
    scope: Flags.string({
      description: 'What it may do: read, licenses, backups, restore, metrics, admin (everything); repeatable. Default: admin.',
      multiple: true,
    }),
    'expires-in': Flags.string({ description: 'Expire after this long: 90d, 12w, 1y, 36h (default: never).' }),
  };

  async run(): Promise<AdminToken & { token: string }> {
    const name = await this.ask(this.flags.name, 'name', 'Token name:');
    const expires = this.flags['expires-in'];
    const scopes = parseScopes(this.flags.scope ?? ['admin']);
    const issued = await this.withDatabase((db) =>
      createAdminToken(db, { name, scopes, ...(expires === undefined ? {} : { expiresInMs: parseDuration(expires, '--expires-in') }) }, this.operationContext()),
    );
    const until = issued.record.expires_at === null ? 'does not expire' : `expires ${issued.record.expires_at}`;
    this.sayCreated(`Created admin token "${issued.record.name}" (${issued.record.id}), scopes ${issued.record.scopes.join(' ')}, ${until}. It is shown only this once:\n${issued.token}`, issued.token);
    return { ...issued.record, token: issued.token };
  }
}
