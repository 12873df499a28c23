import { Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.js';
import { createAdminToken, type AdminToken } from '../../lib/admin-tokens.js';

export default class TokenCreate extends BaseCommand<typeof TokenCreate> {
  static override description = 'Create an admin API token. The token is printed once and stored only as a hash.';
  static override flags = {
    name: Flags.string({ description: 'A unique name, recorded as the actor of what the token does.' }),
  };

  async run(): Promise<AdminToken & { token: string }> {
    const name = await this.ask(this.flags.name, 'name', 'Token name:');
    const issued = await this.withDatabase((db) => createAdminToken(db, { name }, this.operationContext()));
    this.say(`Created admin token "${issued.record.name}" (${issued.record.id}). It is shown only this once:\n${issued.token}`);
    return { ...issued.record, token: issued.token };
  }
}
