/* pytest-agentgym compare view: flip grid and list open two trajectories side by side.
 *
 * Data: #compare-data (one entry per (env, task, repeat) whose state changed
 * between the runs, with where each side's trajectory sits) and the
 * .pair-chunk blocks, read through trajectory.js only when a pair is opened.
 * "#pair=<encoded env:task:rN>" opens that pair; document.body gets
 * data-pair="<id>" once both sides are drawn (tests and scripts can wait on it).
 */
(function () {
  "use strict";

  var T = AgentgymTrajectory, el = T.el, fmt = T.fmt;  // trajectory.js, inlined before this script
  var data = JSON.parse(document.getElementById("compare-data").textContent);
  var F = T.fields(data.turn_fields);
  var panel = document.getElementById("pair");
  var body = document.getElementById("pair-body");
  var title = document.getElementById("pair-title");
  var note = document.getElementById("pair-divergence");
  var sides = document.getElementById("pair-sides");
  var STATES = { pass: "success", fail: "no success", error: "error", missing: "not in this run" };

  function fragmentFor(id) { return "#pair=" + encodeURIComponent(id); }

  function sideHead(label, runId, side) {
    var head = el("div", "side-head");
    head.appendChild(el("h3", null, label + " · " + runId));
    if (!side) {
      head.appendChild(el("div", "banner missing", "not in the " + label.toLowerCase() + " run"));
      return head;
    }
    var banner = el("div", "banner state-" + side.s);
    banner.textContent = STATES[side.s] + ": reward " + fmt(side.w) + ", stopped by " + side.x +
      " after " + side.n + " round(s)";
    head.appendChild(banner);
    return head;
  }

  function placeholder(label, turns) {
    return el("div", "no-turn", "The " + label.toLowerCase() + " has no turn here: it ended after " +
                                turns + " turn(s).");
  }

  function drawPair(pair, base, cand) {
    var content = document.createDocumentFragment();
    sides.replaceChildren(sideHead("Baseline", data.base_run_id, pair.b),
                          sideHead("Candidate", data.candidate_run_id, pair.c));
    var errors = el("div", "pair-grid");
    [base, cand].forEach(function (record) {
      var cell = el("div");
      if (record && record.error) cell.appendChild(T.errorBox(record.error, "Error", "final"));
      errors.appendChild(cell);
    });
    content.appendChild(errors);

    var baseTurns = base ? base.turns : [], candTurns = cand ? cand.turns : [];
    var count = Math.max(baseTurns.length, candTurns.length);
    var d = pair.d, marked = null;
    if (!count) content.appendChild(el("p", "empty", "Neither side recorded a turn."));
    for (var n = 0; n < count; n++) {
      var row = el("div", "pair-grid pair-row");
      row.id = "pair-turn-" + n;
      if (d && d.position === n) {
        row.classList.add("diverges");
        var mark = el("div", "divergence-mark", "▶ First divergence, " + d.text);
        row.appendChild(mark);
        marked = row;
      }
      [[baseTurns, "Baseline", pair.b], [candTurns, "Candidate", pair.c]].forEach(function (side) {
        var turns = side[0];
        if (n < turns.length) {
          var card = T.drawTurn(turns[n], n ? turns[n - 1] : null, F);
          if (d && d.position === n) {
            d.fields.forEach(function (name) {
              var block = card.querySelector("." + name);
              if (block) block.classList.add("differs");
            });
          }
          row.appendChild(card);
        } else if (side[2]) {
          row.appendChild(placeholder(side[1], turns.length));
        } else {
          row.appendChild(el("div", "no-turn", "Not in the " + side[1].toLowerCase() + " run."));
        }
      });
      content.appendChild(row);
    }
    body.replaceChildren(content);
    return marked;
  }

  function load(side) {
    if (!side) return Promise.resolve(null);
    return T.loadChunk("pair-chunk-" + side.c).then(function (records) { return records[side.p]; });
  }

  function showPair(id) {
    var pair = data.pairs[id];
    panel.hidden = false;
    document.body.classList.add("panel-open");
    if (!pair) {
      title.textContent = "Pair not found";
      note.textContent = "";
      sides.replaceChildren();
      body.replaceChildren(el("p", "error-box", "No changed episode " + id + " in this comparison."));
      document.body.dataset.pair = "";
      return;
    }
    title.textContent = pair.env + " · task " + pair.t + " · repeat " + pair.r + " · " + pair.label;
    note.className = "divergence-note" + (pair.d ? "" : " none");
    note.textContent = pair.d ? "First divergence: " + pair.d.text
                              : "No turn differs in its observation, reply or action.";
    sides.replaceChildren();
    body.replaceChildren(el("p", "dim", "Loading…"));
    Promise.all([load(pair.b), load(pair.c)]).then(function (records) {
      var marked = drawPair(pair, records[0], records[1]);
      panel.scrollTop = 0;
      if (marked) marked.scrollIntoView({ block: "start" });
      document.body.dataset.pair = id;
    }).catch(function (error) {
      body.replaceChildren(el("p", "error-box", "Could not read these trajectories: " + error.message));
      document.body.dataset.pair = "";
    });
  }

  function closePanel() {
    panel.hidden = true;
    if (!document.getElementById("trajectory") || document.getElementById("trajectory").hidden) {
      document.body.classList.remove("panel-open");
    }
    delete document.body.dataset.pair;
  }

  document.querySelectorAll("svg.flip-grid").forEach(function (svg) {
    svg.addEventListener("click", function (event) {
      var cell = event.target.closest("rect[data-pair]");
      if (cell) location.hash = fragmentFor(cell.dataset.pair);
    });
  });
  T.route("pair", panel, document.getElementById("pair-close"), showPair, closePanel);
  document.body.dataset.compareReady = "1";
})();
