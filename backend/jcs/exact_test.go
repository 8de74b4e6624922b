package jcs

import (
	"strings"
	"testing"
)

// Exact refuses every way encoding/json reads a document otherwise than jq, Python or a person
// would (docs/threats.md T12).
func TestExact(t *testing.T) {
	type inner struct {
		Status string `json:"status"`
	}
	type doc struct {
		Seq    int64  `json:"seq"`
		Status string `json:"status"`
		Inner  inner  `json:"inner"`
		Kid    string `json:"kid"`
	}
	var d doc
	if err := Exact([]byte(` {"inner":{"status":"a"}, "kid":"k1", "status":"f\u0061iled","seq":1} `), &d); err != nil || d.Status != "failed" {
		t.Fatalf("a document in another order, with white space and an escape: %v %+v", err, d)
	}
	for name, c := range map[string]struct{ in, why string }{
		"repeated member":             {`{"seq":1,"kid":"k1","status":"failed","inner":{"status":"a"},"status":"completed"}`, `duplicate member "status"`},
		"case variant":                {`{"seq":1,"kid":"k1","status":"failed","inner":{"status":"a"},"STATUS":"completed"}`, `member "STATUS" is not one of`},
		"long s folds to s":           {`{"seq":1,"kid":"k1","status":"failed","inner":{"status":"a"},"ſtatus":"completed"}`, `member "ſtatus" is not one of`},
		"kelvin sign folds to k":      {`{"seq":1,"kid":"k1","status":"failed","inner":{"status":"a"},"\u212aid":"k2"}`, "member \"\u212aid\" is not one of"},
		"lone case variant":           {`{"seq":1,"kid":"k1","STATUS":"failed","inner":{"status":"a"}}`, `member "STATUS" is not one of`},
		"unknown member":              {`{"seq":1,"kid":"k1","status":"failed","inner":{"status":"a"},"note":"x"}`, `member "note" is not one of`},
		"missing member":              {`{"seq":1,"kid":"k1","inner":{"status":"a"}}`, `member "status" is missing`},
		"case variant inside a value": {`{"seq":1,"kid":"k1","status":"failed","inner":{"status":"a","ſtatus":"b"}}`, `member "inner" does not decode`},
		"not UTF-8":                   {"{\"seq\":1,\"kid\":\"k1\",\"status\":\"f\xffd\",\"inner\":{\"status\":\"a\"}}", "not UTF-8"},
	} {
		t.Run("T12 "+name, func(t *testing.T) {
			var d doc
			if err := Exact([]byte(c.in), &d); err == nil || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("got %v, want %q", err, c.why)
			}
		})
	}
}
