package identity

import (
	"errors"
	"fmt"
	"time"

	"github.com/aether/aether/backend/site"
)

// Reason codes carried by *Error. They are meant for logs and metrics; the gateway answers
// every one of them with 401 except CodeTokenTooLarge (431 or 401) and CodeRateLimited (429).
const (
	CodeTokenTooLarge     = "token_too_large"
	CodeMalformed         = "token_malformed"
	CodeDuplicateClaim    = "duplicate_claim"
	CodeAlgNotAllowed     = "alg_not_allowed"
	CodeCritUnsupported   = "crit_unsupported"
	CodeKIDInvalid        = "kid_invalid"
	CodeKIDRequired       = "kid_required"
	CodeKIDUnknown        = "kid_unknown"
	CodeKeyAlgMismatch    = "key_alg_mismatch"
	CodeSignatureInvalid  = "signature_invalid"
	CodeDelegationToken   = "delegation_token"
	CodeIssuerInvalid     = "issuer_invalid"
	CodeIssuerBlocked     = "issuer_blocked"
	CodeIssuerIsNode      = "issuer_is_this_node"
	CodeIssuerUnavailable = "issuer_unavailable"
	CodeIssuerMismatch    = "issuer_mismatch"
	CodeIssuerHost        = "issuer_host_too_long"
	CodeFetchTimeout      = "fetch_timeout"
	CodeJWKSURIInvalid    = "jwks_uri_invalid"
	CodeJWKSTooLarge      = "jwks_too_large"
	CodeJWKSInvalid       = "jwks_invalid"
	CodeKeySymmetric      = "key_symmetric"
	CodeKeyTooWeak        = "key_too_weak"
	CodeSubjectMissing    = "sub_missing"
	CodeExpMissing        = "exp_missing"
	CodeIatMissing        = "iat_missing"
	CodeExpired           = "token_expired"
	CodeNotYetValid       = "token_not_yet_valid"
	CodeIatInFuture       = "iat_in_future"
	CodeLifetimeTooLong   = "lifetime_too_long"
	CodeAudience          = "aud_mismatch"
	CodeClaimsInvalid     = "claims_invalid"
	CodeRateLimited       = "rate_limited"
	CodeCanceled          = "canceled"
)

// ErrRateLimited is wrapped by the *Error returned when a new issuer may not be fetched now
// (per-client budget or global fetch limit, J18). The gateway answers it with 429.
var ErrRateLimited = errors.New("identity: too many new issuers")

// Error is every verification failure. Code is a stable reason code for logs; Description is
// safe to send as error_description (constant text, never token or issuer content).
// RetryAfter, set with CodeRateLimited, is when the refused fetch may be tried again.
type Error struct {
	Code        string
	Description string
	RetryAfter  time.Duration
	cause       error
}

func (e *Error) Error() string {
	s := "identity: " + e.Code + ": " + e.Description
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.cause }

func newErr(code, desc string, cause error) *Error {
	return &Error{Code: code, Description: desc, cause: cause}
}

// rateLimited refuses a fetch for now (J18, F5, F6).
func rateLimited(desc string, wait time.Duration) *Error {
	e := newErr(CodeRateLimited, desc, ErrRateLimited)
	e.RetryAfter = wait
	return e
}

// Errors without a cause are shared: they are returned on hot rejection paths.
var (
	errTooLarge      = newErr(CodeTokenTooLarge, "the token is too large", nil)
	errMalformed     = newErr(CodeMalformed, "the token is malformed", nil)
	errDuplicate     = newErr(CodeDuplicateClaim, "the token has duplicate or case-variant member names", nil)
	errAlg           = newErr(CodeAlgNotAllowed, "the token's signing algorithm is not allowed", nil)
	errCrit          = newErr(CodeCritUnsupported, "the token has critical header parameters this server does not understand", nil)
	errKIDInvalid    = newErr(CodeKIDInvalid, "the token's key id is invalid", nil)
	errKIDRequired   = newErr(CodeKIDRequired, "the token has no key id and the issuer publishes more than one signing key", nil)
	errKIDUnknown    = newErr(CodeKIDUnknown, "the issuer does not publish the token's signing key", nil)
	errKeyAlg        = newErr(CodeKeyAlgMismatch, "the issuer's key does not match the token's algorithm", nil)
	errSignature     = newErr(CodeSignatureInvalid, "the token's signature is invalid", nil)
	errDelegation    = newErr(CodeDelegationToken, "a delegation token is not an identity token", nil)
	errSubject       = newErr(CodeSubjectMissing, "the token has no usable sub claim", nil)
	errExpMissing    = newErr(CodeExpMissing, "the token has no exp claim", nil)
	errIatMissing    = newErr(CodeIatMissing, "the token has no iat claim", nil)
	errExpired       = newErr(CodeExpired, "the token has expired", nil)
	errNotYetValid   = newErr(CodeNotYetValid, "the token is not valid yet", nil)
	errIatFuture     = newErr(CodeIatInFuture, "the token is issued in the future", nil)
	errLifetime      = newErr(CodeLifetimeTooLong, "the token's lifetime is too long", nil)
	errAudience      = newErr(CodeAudience, "the token's audience does not include this node", nil)
	errIssuerInvalid = newErr(CodeIssuerInvalid, "the token's issuer must be an https URL", nil)
	errIssuerBlocked = newErr(CodeIssuerBlocked, "the token's issuer address is not allowed", nil)
	errIssuerHost    = newErr(CodeIssuerHost, fmt.Sprintf("the token's issuer host is too long: at most %d characters and %d labels", site.MaxHostLen, site.MaxLabels), nil)
)
