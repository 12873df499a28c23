import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { pagingFlags } from '../../cli/flags.js';
import { formatTable } from '../../cli/output.js';
import { listAdminTokensPage, tokenNameWarnings, type AdminToken } from '../../lib/admin-tokens.js';
import { escapeInvisible } from '../../lib/validate.js';

export default class TokenList extends BaseCommand<typeof TokenList> {
  static override description = 'List admin API tokens (never the tokens themselves).';
  static override flags = { all: Flags.boolean({ description: 'Include revoked tokens.', default: false }), ...pagingFlags };

  async run(): Promise<AdminToken[]> {
    const { all, limit, offset, cursor } = this.flags;
    const { items: tokens, next_cursor } = await this.withDatabase((db) => listAdminTokensPage(db, { includeRevoked: all, limit, offset, cursor }));
    this.say(
      formatTable(tokens, [
        { header: 'ID', value: (t) => t.id },
        { header: 'NAME', value: (t) => escapeInvisible(t.name) },
        { header: 'SCOPES', value: (t) => t.scopes.join(' ') },
        { header: 'PREFIX', value: (t) => `${t.prefix}...` },
        { header: 'EXPIRES', value: (t) => t.expires_at },
        { header: 'CREATED', value: (t) => t.created_at },
        { header: 'LAST USED', value: (t) => t.last_used_at },
        { header: 'REVOKED', value: (t) => t.revoked_at },
      ]),
    );
    for (const warning of tokenNameWarnings(tokens)) this.warnLine(warning);
    this.sayNextPage(next_cursor);
    return tokens;
  }
}
