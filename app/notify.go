package app

import "github.com/aether/aether/backend/owner"

// notifier shows consent requests as desktop notifications with Allow and Deny. Where
// there is no notification server it shows nothing and says so once in the log: the tray
// badge and the Consent page still list every request.
type notifier interface {
	// request shows a new device authorization request, with the others of its issuer.
	request(owner.ConsentRequest)
	// withdraw removes a request's notification once it was decided or expired elsewhere.
	withdraw(requestID string)
	// tell shows a short message without actions (the result of a decision).
	tell(summary, body string)
	close()
}

// notifyActions are what a notification's buttons do. decide (or denySite, for a burst of
// one issuer's requests) is called at most once per notification, and only for the server's
// own Allow, Deny or Deny all; everything else (a click on the body, a dismissal) at most
// opens the window on that request ("": the Consent page).
type notifyActions struct {
	decide   func(r owner.ConsentRequest, allow bool)
	denySite func(site, siteName string)
	open     func(userCode string)
	// lost is called when the session bus goes away without close (the session ended).
	lost func()
}

type noNotifier struct{}

func (noNotifier) request(owner.ConsentRequest) {}
func (noNotifier) withdraw(string)              {}
func (noNotifier) tell(string, string)          {}
func (noNotifier) close()                       {}
