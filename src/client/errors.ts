/** What the client's operations throw: a stable `code` (docs/client.md lists them) and a message. */
export class LicenseClientError extends Error {
  override readonly name = 'LicenseClientError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
