/* pytest-agentgym view: what it adds to the pages it serves besides the index.
 *
 * A small badge linking back to the runs index (window.AGENTGYM_LIVE.label on a compare
 * view or trend page) and, on a run's report page, polling of its /api/runs/<key>/state
 * while the run is running: when the run's files changed since the page was rendered
 * (window.AGENTGYM_LIVE.token), the page is loaded again, rendered anew from the run
 * directory by the server; the browser keeps the scroll position of a reload, and an
 * open episode stays open (its #episode= is in the URL). Polling stops once the run has ended.
 */
(function () {
  "use strict";

  var live = window.AGENTGYM_LIVE;
  var badge = document.createElement("div");
  badge.id = "agentgym-live";
  var back = document.createElement("a");
  back.href = "/"; back.textContent = "all runs";
  var words = document.createElement("span");
  badge.appendChild(back); badge.appendChild(document.createTextNode(" · ")); badge.appendChild(words);
  document.body.appendChild(badge);

  if (!live.state) {  // a compare view or a trend page: the badge alone
    words.textContent = live.label;
    return;
  }
  document.body.setAttribute("data-live-token", live.token);

  function say(state) {
    words.textContent = state.status + " · " + state.episodes + " episode(s) · checked " + new Date().toLocaleTimeString();
  }

  function poll() {
    fetch(live.state, { cache: "no-store" }).then(function (answer) {
      if (!answer.ok) throw new Error("HTTP " + answer.status);
      return answer.json();
    }).then(function (state) {
      say(state);
      if (state.token !== live.token) {
        location.reload();  // the browser puts the page back where it was scrolled to
        return;
      }
      if (state.status === "running") setTimeout(poll, live.every_ms);
    }).catch(function (error) {
      words.textContent = "server unreachable (" + error.message + "); retrying";
      setTimeout(poll, live.every_ms * 3);
    });
  }

  say({ status: live.status, episodes: live.episodes });
  if (live.status === "running") setTimeout(poll, live.every_ms);
})();
