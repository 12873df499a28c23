import * as Args from '@oclif/core/args';
import { BaseCommand } from '../../cli/base-command.js';
import { revokeAdminToken, type AdminToken } from '../../lib/admin-tokens.js';

export default class TokenRevoke extends BaseCommand<typeof TokenRevoke> {
  static override description = 'Revoke an admin API token by id or name; it stops working at once.';
  static override args = { token: Args.string({ description: 'Token id or name.', required: true }) };

  async run(): Promise<AdminToken> {
    const token = await this.withDatabase((db) => revokeAdminToken(db, this.args.token, this.operationContext()));
    this.say(`Revoked admin token "${token.name}" (${token.id}).`);
    return token;
  }
}
