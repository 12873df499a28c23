import { isLicenseServerError, LicenseServerError } from '../lib/errors.js';

export interface ErrorBody {
  /** `request_id` is the answer's X-Request-Id, also in the request's log line. */
  readonly error: { readonly code: string; readonly message: string; readonly request_id: string };
}

/**
 * The one error shape of the API. A LicenseServerError keeps its code, message and the
 * status from the error table; anything else is a bug and says only "internal error".
 */
export function toErrorResponse(error: unknown, requestId: string): { status: number; body: ErrorBody } {
  if (isLicenseServerError(error)) {
    return { status: error.httpStatus, body: { error: { code: error.code, message: error.message, request_id: requestId } } };
  }
  const internal = new LicenseServerError('INTERNAL', 'internal error');
  return { status: internal.httpStatus, body: { error: { code: internal.code, message: internal.message, request_id: requestId } } };
}
