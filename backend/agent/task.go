package agent

import (
	"errors"
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/receipts"
)

// AuthRequired is what a node says when a turn needs the owner's consent: the
// status message of a TASK_STATE_AUTH_REQUIRED task (docs/wire.md, "Turns").
type AuthRequired struct {
	TaskID    a2a.TaskID
	ContextID string
	// Reason is missing, expired, revoked, wrong_brand, wrong_agent or invalid.
	Reason                 string
	Text                   string // the human explanation
	ConsentURL             string
	DeviceAuthorizationURL string
	TokenURL               string
	Scope                  string
	CredentialHeader       string
	Brand                  string
	// ResumeTaskID is the task to send the turn on again once a token is held.
	ResumeTaskID a2a.TaskID
}

// ParseAuthRequired reads the AUTH_REQUIRED status of task: its text part and
// the PACT data part. A missing resumeTaskId means the task itself.
func ParseAuthRequired(task *a2a.Task) (*AuthRequired, error) {
	if task == nil || task.Status.State != a2a.TaskStateAuthRequired {
		return nil, errors.New("the task is not in TASK_STATE_AUTH_REQUIRED")
	}
	ar := &AuthRequired{TaskID: task.ID, ContextID: task.ContextID, Text: messageText(task.Status.Message)}
	var data map[string]any
	if m := task.Status.Message; m != nil {
		for _, p := range m.Parts {
			if p == nil {
				continue
			}
			if d, ok := p.Data().(map[string]any); ok {
				data = d
				break
			}
		}
	}
	if data == nil {
		return nil, fmt.Errorf("task %s is AUTH_REQUIRED but its status has no data part saying how to get consent (text: %q)", task.ID, ar.Text)
	}
	str := func(k string) string {
		s, _ := data[k].(string)
		return s
	}
	ar.Reason = str("reason")
	ar.ConsentURL = str("consentUrl")
	ar.DeviceAuthorizationURL = str("deviceAuthorizationUrl")
	ar.TokenURL = str("tokenUrl")
	ar.Scope = str("scope")
	ar.CredentialHeader = str("credentialHeader")
	ar.Brand = str("brand")
	ar.ResumeTaskID = a2a.TaskID(str("resumeTaskId"))
	if ar.ResumeTaskID == "" {
		ar.ResumeTaskID = task.ID
	}
	if ar.Reason == "" {
		return nil, fmt.Errorf("task %s is AUTH_REQUIRED but its data part has no reason", task.ID)
	}
	return ar, nil
}

// Outcome is what the artifacts of a finished turn hold.
type Outcome struct {
	// Answer is the text of the "answer" artifact (of every text artifact
	// other than the receipt when none is named so).
	Answer string
	// ReceiptJWS is the receipt's compact JWS; ReceiptData its claims as the
	// node sent them alongside (unverified: trust only the JWS).
	ReceiptJWS  string
	ReceiptData map[string]any
	// ReceiptProof is the receipt's C2SP tlog-proof in the node's log (unverified).
	ReceiptProof string
}

// ReadOutcome reads the answer and receipt artifacts of task.
func ReadOutcome(task *a2a.Task) Outcome {
	var o Outcome
	var named, other []string
	for _, a := range task.Artifacts {
		if a == nil {
			continue
		}
		if jws, data, ok := receiptParts(a); ok {
			o.ReceiptJWS, o.ReceiptData, o.ReceiptProof = jws, data, proofPart(a)
			continue
		}
		var text strings.Builder
		for _, p := range a.Parts {
			if p != nil {
				text.WriteString(p.Text())
			}
		}
		if a.Name == "answer" {
			named = append(named, text.String())
		} else if text.Len() > 0 {
			other = append(other, text.String())
		}
	}
	if len(named) == 0 {
		named = other
	}
	o.Answer = strings.Join(named, "\n")
	return o
}

// receiptParts recognises a receipt artifact: named "receipt", or carrying a
// data part next to a compact JWS.
func receiptParts(a *a2a.Artifact) (jws string, data map[string]any, ok bool) {
	for _, p := range a.Parts {
		if p == nil {
			continue
		}
		if d, isMap := p.Data().(map[string]any); isMap {
			data = d
		} else if t := strings.TrimSpace(p.Text()); looksLikeJWS(t) {
			jws = t
		}
	}
	if jws == "" || (a.Name != "receipt" && data == nil) {
		return "", nil, false
	}
	return jws, data, true
}

// proofPart is the text part of a receipt artifact that is a C2SP tlog-proof, or "".
func proofPart(a *a2a.Artifact) string {
	for _, p := range a.Parts {
		if p != nil && strings.HasPrefix(p.Text(), receipts.ProofHeader+"\n") {
			return p.Text()
		}
	}
	return ""
}

func looksLikeJWS(s string) bool {
	if strings.Count(s, ".") != 2 || strings.ContainsAny(s, " \n\t") {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" {
			return false
		}
	}
	return true
}

// StatusText is the text of the task's status message (a failure's reason).
func StatusText(task *a2a.Task) string { return messageText(task.Status.Message) }
