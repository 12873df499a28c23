import type { IncomingMessage } from 'node:http';
import { LicenseServerError, type ErrorCode } from '../lib/errors.js';
import { describe } from '../lib/validate.js';

export const MAX_BODY_BYTES = 1024 * 1024;
/** No body of ours nests beyond 3 levels; deeper input only threatens code that recurses. */
export const MAX_BODY_DEPTH = 32;

/**
 * Reads a JSON object body: Content-Type application/json (415 otherwise), at most 1 MiB
 * (413, checked against Content-Length before reading and against the bytes as they come),
 * within `timeoutMs` (408: a client that never finishes its body does not hold a request
 * slot forever). An empty body reads as an empty object, for POSTs that carry none.
 */
export async function readJsonObject(request: IncomingMessage, timeoutMs: number): Promise<Record<string, unknown>> {
  const length = request.headers['content-length'];
  const chunked = request.headers['transfer-encoding'] !== undefined;
  if (!chunked && (length === undefined || length === '0')) {
    return {};
  }
  const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') {
    throw new LicenseServerError('UNSUPPORTED_MEDIA_TYPE', `expected Content-Type application/json, got ${type ? describe(type) : 'none'}`);
  }
  if (length !== undefined && Number(length) > MAX_BODY_BYTES) {
    throw new LicenseServerError('BODY_TOO_LARGE', `the body is ${Number(length)} bytes; the limit is ${MAX_BODY_BYTES}`);
  }
  const text = decodeJsonText(await readBytes(request, timeoutMs, MAX_BODY_BYTES, 'BODY_TOO_LARGE'));
  if (nestingDepth(text) > MAX_BODY_DEPTH) {
    throw new LicenseServerError('INVALID_JSON', `the body nests arrays and objects more than ${MAX_BODY_DEPTH} levels deep`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new LicenseServerError('INVALID_JSON', 'the body is not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new LicenseServerError('INVALID_JSON', 'the body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

/**
 * Reads a body of a route's own media type (a CSV import) as bytes, under the route's limit:
 * Content-Type `type`, with no charset or `charset=utf-8` (415 otherwise); an empty body is
 * an empty buffer. What the bytes must be is the core's to check.
 */
export async function readRawBody(request: IncomingMessage, timeoutMs: number, spec: { readonly type: string; readonly maxBytes: number; readonly tooLarge: ErrorCode }): Promise<Buffer> {
  const length = request.headers['content-length'];
  if (request.headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) return Buffer.alloc(0);
  const [essence = '', ...parameters] = (request.headers['content-type'] ?? '').split(';').map((part) => part.trim().toLowerCase());
  const charset = parameters.find((parameter) => parameter.startsWith('charset='))?.slice('charset='.length).replace(/^"|"$/g, '');
  if (essence !== spec.type || (charset !== undefined && charset !== 'utf-8')) {
    throw new LicenseServerError('UNSUPPORTED_MEDIA_TYPE', `expected Content-Type ${spec.type} (UTF-8), got ${essence ? describe(request.headers['content-type']!) : 'none'}`, { hint: `Send "Content-Type: ${spec.type}; charset=utf-8".` });
  }
  if (length !== undefined && Number(length) > spec.maxBytes) {
    throw new LicenseServerError(spec.tooLarge, `the body is ${Number(length)} bytes; the limit is ${spec.maxBytes}`);
  }
  return readBytes(request, timeoutMs, spec.maxBytes, spec.tooLarge);
}

function decodeJsonText(bytes: Buffer): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new LicenseServerError('INVALID_JSON', 'the body is not UTF-8');
  }
}

function readBytes(request: IncomingMessage, timeoutMs: number, maxBytes: number, tooLarge: ErrorCode): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // A request queued behind a pipelined one may be gone before its handler gets here.
    if (request.destroyed) {
      reject(new LicenseServerError('INVALID_INPUT', 'the client aborted the request'));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (error?: LicenseServerError) => {
      clearTimeout(timer);
      request.off('data', onData).off('end', onEnd).off('error', onError).off('close', onAborted);
      if (error) {
        // Stop reading; the response goes out with Connection: close.
        request.pause();
        reject(error);
      } else {
        resolve(Buffer.concat(chunks));
      }
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) finish(new LicenseServerError(tooLarge, `the body exceeds the limit of ${maxBytes} bytes`));
      else chunks.push(chunk);
    };
    const onEnd = () => finish();
    const onError = () => finish(new LicenseServerError('INVALID_INPUT', 'the request body could not be read'));
    const onAborted = () => finish(new LicenseServerError('INVALID_INPUT', 'the client aborted the request'));
    const timer = setTimeout(
      () => finish(new LicenseServerError('REQUEST_TIMEOUT', `the body did not arrive within ${timeoutMs / 1000} s`)),
      timeoutMs,
    );
    request.on('data', onData).on('end', onEnd).on('error', onError).on('close', onAborted);
  });
}

/** The deepest nesting of brackets outside strings, in one pass over the text. */
function nestingDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const char = text.charCodeAt(i);
    if (inString) {
      if (char === 0x5c) i += 1; // backslash: the next character is escaped
      else if (char === 0x22) inString = false;
    } else if (char === 0x22) inString = true;
    else if (char === 0x5b || char === 0x7b) deepest = Math.max(deepest, ++depth);
    else if (char === 0x5d || char === 0x7d) depth -= 1;
  }
  return deepest;
}
