package offline

import (
	"errors"
	"fmt"
)

// Error is a failure with a machine-readable code, as the TypeScript reference's
// LicenseServerError: Code is e.g. "SIGNATURE_INVALID", Message is the human text
// ("signature verification failed").
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

func newError(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of an *Error in err's chain, or "" when there is none.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Error codes of this package.
const (
	CodeLicenseFileMalformed          = "LICENSE_FILE_MALFORMED"
	CodeLicenseFileUnsupportedVersion = "LICENSE_FILE_UNSUPPORTED_VERSION"
	CodeSignatureInvalid              = "SIGNATURE_INVALID"
	CodeLicenseNotYetValid            = "LICENSE_NOT_YET_VALID"
	CodeLicenseExpired                = "LICENSE_EXPIRED"
	CodeHardwareMismatch              = "HARDWARE_MISMATCH"
	CodeHardwareIDRequired            = "HARDWARE_ID_REQUIRED"
	CodeDecryptionFailed              = "DECRYPTION_FAILED"
	CodePublicKeyInvalid              = "PUBLIC_KEY_INVALID"
	CodeGraceTokenInvalid             = "GRACE_TOKEN_INVALID"
	CodeGraceTokenExpired             = "GRACE_TOKEN_EXPIRED"
)
