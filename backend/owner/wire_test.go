package owner

import (
	"context"
	"errors"
	"testing"
)

// TestOneRuleForDecisions: the admin API, the node API and a desktop notification decide
// through Service.Decide, whose rule is DecisionRequest.Validate; a body it refuses never
// reaches consent (the service here has none: reaching it would panic).
func TestOneRuleForDecisions(t *testing.T) {
	s := New(Config{})
	negative, noLimit := int64(-1), int64(0)
	for _, bad := range []DecisionRequest{
		{UserCode: "", Decision: DecisionDeny},
		{UserCode: "BCDF-GHJK-BCDF-GHJK-BCDF-GHJK-BCDF", Decision: DecisionDeny},
		{UserCode: "BCDF-GHJK", Decision: "maybe", Duration: Duration1Day},
		{UserCode: "BCDF-GHJK", Decision: DecisionAllow},
		{UserCode: "BCDF-GHJK", Decision: DecisionAllow, Duration: "1y"},
		{UserCode: "BCDF-GHJK", Decision: DecisionDeny, Duration: "1y"},
		{UserCode: "BCDF-GHJK", Decision: DecisionAllow, Duration: Duration1Day, TokensPerDay: &negative},
	} {
		if _, err := s.Decide(context.Background(), "df_1", bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
	for _, ok := range []DecisionRequest{
		{UserCode: "BCDF-GHJK", Decision: DecisionDeny},
		{UserCode: "BCDF-GHJK", Decision: DecisionDeny, Duration: DurationForever},
		{UserCode: "BCDF-GHJK", Decision: DecisionAllow, Duration: Duration30Days},
		{UserCode: "BCDF-GHJK", Decision: DecisionAllow, Duration: Duration30Days, TokensPerDay: &noLimit},
	} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// TestPutBrandChecksTheAddress: a brand body for another id is refused at its id field
// before policy.json is read (the service here has no node: reading it would panic).
func TestPutBrandChecksTheAddress(t *testing.T) {
	_, err := New(Config{}).PutBrand(context.Background(), "docs", Brand{ID: "other"})
	var fe *FieldErrors
	if !errors.As(err, &fe) || len(fe.Fields) != 1 || fe.Fields[0].Field != "id" {
		t.Fatalf("PutBrand(docs, other): %v", err)
	}
}
