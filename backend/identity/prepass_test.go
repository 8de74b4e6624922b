package identity

import "testing"

func TestCheckMembers(t *testing.T) {
	for _, tc := range []struct {
		json string
		want *Error
	}{
		{`{}`, nil},
		{` { "sub" : "a" , "iss" : "b" } `, nil},
		{`{"sub":"a","nested":{"sub":1,"sub":2},"arr":[{"sub":1},"}",{"x":"\"}"}]}`, nil},
		{`{"a":"\\","b":"\\\""}`, nil},
		{`{"sub":"a","sub":"b"}`, errDuplicate},
		{`{"sub":"a","Sub":"b"}`, errDuplicate},
		{`{"SUB":"b"}`, errDuplicate},
		{`{"sub":"a","\u0073ub":"b"}`, errDuplicate},
		{`{"s\u0075b":"b","sub":1}`, errDuplicate},
		{`{"x":1,"X":2}`, errDuplicate},
		{`{"kelvin\u212a":1,"kelvink":2}`, errDuplicate},
		{`[]`, errMalformed},
		{`{"a"}`, errMalformed},
		{`{"a":1 "b":2}`, errMalformed},
		{`{"a":"unterminated}`, errMalformed},
		{`{"a":"\ud800"}`, nil}, // json decodes it; not a member name problem
	} {
		if got := checkMembers([]byte(tc.json), claimNames); got != tc.want {
			t.Errorf("checkMembers(%s) = %v, want %v", tc.json, got, tc.want)
		}
	}
}
