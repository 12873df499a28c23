import type { IncomingMessage } from 'node:http';
import { LicenseServerError } from '../lib/errors.js';

export const MAX_BODY_BYTES = 1024 * 1024;

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
    throw new LicenseServerError('UNSUPPORTED_MEDIA_TYPE', `expected Content-Type application/json, got ${type ? JSON.stringify(type) : 'none'}`);
  }
  if (length !== undefined && Number(length) > MAX_BODY_BYTES) {
    throw new LicenseServerError('BODY_TOO_LARGE', `the body is ${Number(length)} bytes; the limit is ${MAX_BODY_BYTES}`);
  }
  const text = await readText(request, timeoutMs);
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

function readText(request: IncomingMessage, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (error?: LicenseServerError) => {
      clearTimeout(timer);
      request.off('data', onData).off('end', onEnd).off('error', onError).off('aborted', onAborted);
      if (error) {
        // Stop reading; the response goes out with Connection: close.
        request.pause();
        reject(error);
      } else {
        try {
          resolve(new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks)));
        } catch {
          reject(new LicenseServerError('INVALID_JSON', 'the body is not UTF-8'));
        }
      }
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) finish(new LicenseServerError('BODY_TOO_LARGE', `the body exceeds the limit of ${MAX_BODY_BYTES} bytes`));
      else chunks.push(chunk);
    };
    const onEnd = () => finish();
    const onError = () => finish(new LicenseServerError('INVALID_INPUT', 'the request body could not be read'));
    const onAborted = () => finish(new LicenseServerError('INVALID_INPUT', 'the client aborted the request'));
    const timer = setTimeout(
      () => finish(new LicenseServerError('REQUEST_TIMEOUT', `the body did not arrive within ${timeoutMs / 1000} s`)),
      timeoutMs,
    );
    request.on('data', onData).on('end', onEnd).on('error', onError).on('aborted', onAborted);
  });
}
