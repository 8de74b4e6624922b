package app

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/aether/aether/backend/owner"
)

// Pages of the UI the shell opens the window on.
const (
	pageConsent = "/pact/consent"
	pageBrands  = "/brands"
)

// userCodeFromArgs finds a consent link (…/pact/consent?user_code=XXXX-XXXX) among the
// program's arguments, as a URL handler or a second launch passes them: the admin UI's
// https:// link, or the same link with the aether: scheme, which the desktop entry registers
// (x-scheme-handler/aether) so that it opens this app, running or not. The host is not
// checked: the code only selects a page of this app's own window.
func userCodeFromArgs(args []string) string {
	for _, a := range args {
		u, err := url.Parse(a)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "aether") || strings.TrimRight(u.Path, "/") != pageConsent {
			continue
		}
		if c := u.Query().Get("user_code"); owner.PlausibleUserCode(c) {
			return c
		}
	}
	return ""
}

// consentPage is the window's address for one request.
func consentPage(userCode string) string {
	return pageConsent + "?user_code=" + url.QueryEscape(userCode)
}

// navigateJS asks the UI's router to show path (frontend/src/router.ts listens for
// "aether:navigate"; it ignores anything but its own pages). WebKit may run it before the
// page's module script has run (the load-finished signal can come first), so until the
// load event it waits for that event.
func navigateJS(path string) string {
	quoted, _ := json.Marshal(path) // a string always marshals
	return `(function(){var go=function(){window.dispatchEvent(new CustomEvent("aether:navigate",{detail:` + string(quoted) + `}))};` +
		`if(document.readyState==="complete"){go()}else{window.addEventListener("load",go,{once:true})}})();`
}
