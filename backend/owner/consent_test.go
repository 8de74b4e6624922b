package owner

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aether/aether/backend/consent"
)

// TestConsentErrorKinds: every consent error the owner can meet has its kind, so that each
// transport answers it the same way, and keeps consent's words for the owner.
func TestConsentErrorKinds(t *testing.T) {
	for from, kind := range map[error]error{
		consent.ErrNotFound:       ErrNotFound,
		consent.ErrAlreadyDecided: ErrAlreadyDecided,
		consent.ErrExpired:        ErrExpired,
		consent.ErrLocked:         ErrExpired,
		consent.ErrBrandChanged:   ErrExpired,
		consent.ErrWrongCode:      ErrCodeMismatch,
		consent.ErrBadUserCode:    ErrCodeMismatch,
		consent.ErrBadDuration:    ErrInvalid,
	} {
		err := consentErr(fmt.Errorf("decide df_1: %w", from))
		if !errors.Is(err, kind) || !errors.Is(err, from) || err.Error() != "decide df_1: "+from.Error() {
			t.Errorf("%v: got %v (kind %v? %v)", from, err, kind, errors.Is(err, kind))
		}
	}
	other := errors.New("disk on fire")
	if err := consentErr(other); err != other {
		t.Errorf("an unclassified error became %v", err)
	}
}

func TestDurations(t *testing.T) {
	for in, want := range map[string]consent.Duration{"": consent.DefaultDuration, Duration1Day: consent.Day, Duration30Days: consent.Month, DurationForever: consent.Forever} {
		if got, err := durationOf(in); err != nil || got != want {
			t.Errorf("durationOf(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := durationOf("1y"); !errors.Is(err, ErrInvalid) {
		t.Errorf("durationOf(1y): %v", err)
	}
}
