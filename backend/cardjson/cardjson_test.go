package cardjson

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

func card() *a2a.AgentCard {
	return &a2a.AgentCard{
		Name:                 "Review",
		SecurityRequirements: a2a.SecurityRequirementsOptions{{"pactAgent": a2a.SecuritySchemeScopes{}}},
		Skills: []a2a.AgentSkill{{ID: "review", Name: "Review", SecurityRequirements: a2a.SecurityRequirementsOptions{{
			"pactAgent": a2a.SecuritySchemeScopes{}, "pactDelegation": a2a.SecuritySchemeScopes{"review:read_only"},
		}}}},
	}
}

// Marshal writes StringList objects; a2a-go's own reader cannot read them,
// Unmarshal can, and gets back the card it started from.
func TestSpecForm(t *testing.T) {
	body, err := Marshal(card())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"securityRequirements":[{"schemes":{"pactAgent":{}}}]`,
		`"securityRequirements":[{"schemes":{"pactAgent":{},"pactDelegation":{"list":["review:read_only"]}}}]`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("card JSON lacks %s:\n%s", want, body)
		}
	}
	var plain a2a.AgentCard
	if err := json.Unmarshal(body, &plain); err == nil {
		t.Error("a2a-go's decoder read the spec form; the reader below would not be needed")
	}
	var got a2a.AgentCard
	if err := Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, card()) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, *card())
	}
}

// What a2a-go v2.4.0 servers write reads the same.
func TestArrayForm(t *testing.T) {
	body, err := json.Marshal(card())
	if err != nil {
		t.Fatal(err)
	}
	var got a2a.AgentCard
	if err := Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, card()) {
		t.Errorf("array form:\n got %+v\nwant %+v", got, *card())
	}
}

func TestMalformedScopes(t *testing.T) {
	for _, c := range []struct{ schemes, where string }{
		{`{"x": null}`, "securityRequirements[0].schemes.x"},
		{`{"x": "a"}`, "securityRequirements[0].schemes.x"},
		{`{"x": {"list": "a"}}`, "securityRequirements[0].schemes.x"},
		{`{"x": {"list": [1]}}`, "securityRequirements[0].schemes.x"},
		{`{"x": {"list": [], "scopes": ["a"]}}`, "unknown member"},
		{`{"x": [1]}`, "securityRequirements[0].schemes.x"},
	} {
		body := `{"name": "n", "securityRequirements": [{"schemes": ` + c.schemes + `}]}`
		var got a2a.AgentCard
		err := Unmarshal([]byte(body), &got)
		if err == nil || !strings.Contains(err.Error(), c.where) {
			t.Errorf("%s: %v, want an error naming %s", c.schemes, err, c.where)
		}
	}
	skill := `{"name": "n", "skills": [{"id": "a"}, {"id": "b", "securityRequirements": [{"schemes": {"y": {"list": {}}}}]}]}`
	var got a2a.AgentCard
	if err := Unmarshal([]byte(skill), &got); err == nil || !strings.Contains(err.Error(), "skills[1].securityRequirements[0].schemes.y") {
		t.Errorf("skill: %v", err)
	}
}
