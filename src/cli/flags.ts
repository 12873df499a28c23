import * as Flags from '@oclif/core/flags';

/**
 * Every list command's paging: a page of --limit rows; when more follow, the command prints
 * `next page: --cursor <cursor>` on standard error (stdout keeps the list, --json one document).
 */
export const pagingFlags = {
  limit: Flags.integer({ description: 'At most this many rows (1-10000).', default: 100 }),
  cursor: Flags.string({ description: 'Start after the previous page: the cursor its "next page:" line printed (same filters).', exclusive: ['offset'] }),
  offset: Flags.integer({ description: 'Skip this many rows (at most 10000; page further with --cursor).' }),
};

/** The listener's flags, shared by `serve` and `config show` (which shows their effect). */
export const serverFlags = {
  host: Flags.string({ description: 'Address to listen on (default: LICENSE_HOST or 127.0.0.1).' }),
  port: Flags.integer({ description: 'Port to listen on (default: LICENSE_PORT or 8080).', min: 0, max: 65535 }),
  'tls-cert': Flags.string({ description: 'PEM certificate file; with --tls-key, serve HTTPS (default: LICENSE_TLS_CERT).' }),
  'tls-key': Flags.string({ description: 'PEM private key file for --tls-cert (default: LICENSE_TLS_KEY).' }),
};
