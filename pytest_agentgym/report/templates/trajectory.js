/* pytest-agentgym pages: what the report and the compare view share.
 *
 * Trajectory chunks (<script> data blocks of plain JSON, or gzip + base64 for
 * big runs) are parsed only when one of their episodes is opened, and kept.
 * A turn is drawn as a card: observation, reply, extracted action, feedback.
 * Everything from a run is written with textContent, never as markup.
 */
var AgentgymTrajectory = (function () {
  "use strict";

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function fmt(value, digits) {
    if (value === null || value === undefined) return "—";
    return typeof value === "number" ? value.toFixed(digits === undefined ? 3 : digits) : String(value);
  }

  /* Field name -> position in a stored turn (the page's turn_fields). */
  function fields(names) {
    var F = {};
    names.forEach(function (name, n) { F[name] = n; });
    return F;
  }

  var chunkCache = new Map();

  function inflate(base64) {
    if (typeof DecompressionStream === "undefined") {
      return Promise.reject(new Error(
        "this browser has no DecompressionStream, which this large page needs to unpack " +
        "trajectories; open it in a browser from 2023 or later, or render it again without " +
        "compression (pytest-agentgym report RUN_DIR --no-compress)"));
    }
    var binary = atob(base64), bytes = new Uint8Array(binary.length);
    for (var n = 0; n < binary.length; n++) bytes[n] = binary.charCodeAt(n);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text();
  }

  /* The records of the data block with this id (a promise). */
  function loadChunk(id) {
    if (!chunkCache.has(id)) {
      var node = document.getElementById(id);
      var text = node.dataset.encoding === "json" ? Promise.resolve(node.textContent)
                                                   : inflate(node.textContent.trim());
      chunkCache.set(id, text.then(JSON.parse));
    }
    return chunkCache.get(id);
  }

  function errorBox(error, heading, cls) {
    var box = el("div", "error-box " + (cls || ""));
    box.appendChild(el("strong", null, heading + ": " + error.type + " (from the " + error.where + ")"));
    box.appendChild(el("pre", null, error.message));
    return box;
  }

  function textBlock(label, text, cls) {
    var block = el("div", "block " + (cls || ""));
    block.appendChild(el("div", "block-label", label));
    block.appendChild(el("pre", null, text));
    return block;
  }

  /* One turn as a card; F maps field names to positions (see fields). */
  function drawTurn(turn, previous, F) {
    var card = el("article", "turn" + (turn[F.action] === null ? " rejected" : "") + (turn[F.done] ? " final" : ""));
    var head = el("div", "turn-head");
    head.appendChild(el("strong", null, "Turn " + turn[F.index]));
    head.appendChild(el("span", "chip", "reward " + fmt(turn[F.reward])));
    if (turn[F.score] !== null) head.appendChild(el("span", "chip", "score " + fmt(turn[F.score])));
    if (turn[F.done]) head.appendChild(el("span", "chip done", "done"));
    head.appendChild(el("span", "chip", "model " + fmt(turn[F.model_latency_s], 2) + " s"));
    head.appendChild(el("span", "chip", "env " + fmt(turn[F.env_latency_s], 2) + " s"));
    if (turn[F.prompt_tokens] !== null || turn[F.completion_tokens] !== null) {
      head.appendChild(el("span", "chip", "tokens " + fmt(turn[F.prompt_tokens], 0) + " in / " +
                                         fmt(turn[F.completion_tokens], 0) + " out"));
    }
    card.appendChild(head);
    if (turn[F.observation] === null) {  // stored once: it repeats the previous turn's feedback
      card.appendChild(el("div", "dim observation", "Observation: the feedback of turn " +
                                                    (previous ? previous[F.index] : "?") + " (above)."));
    } else {
      card.appendChild(textBlock("Observation shown to the model", turn[F.observation], "observation"));
    }
    card.appendChild(textBlock("Model reply", turn[F.reply], "reply"));
    var action = el("div", "block action");
    action.appendChild(el("div", "block-label", "Extracted action"));
    if (turn[F.action] === null) {
      action.appendChild(el("div", "rejected-note", "none: the reply was rejected on the client side and the server was not called"));
    } else {
      action.appendChild(el("code", null, turn[F.action]));
    }
    card.appendChild(action);
    card.appendChild(textBlock("Feedback", turn[F.feedback], "feedback"));
    return card;
  }

  /* A side panel that follows the URL: "#<name>=<encoded id>" shows it (show(id)),
   * any other fragment closes it (close()); its close button and Escape clear the fragment. */
  function route(name, panel, closeButton, show, close) {
    var pattern = new RegExp("^#" + name + "=(.*)$");
    function follow() {
      var match = pattern.exec(location.hash);
      if (!match) { close(); return; }
      var id;
      try { id = decodeURIComponent(match[1]); } catch (e) { id = match[1]; }
      show(id);
    }
    closeButton.addEventListener("click", function () {
      if (location.hash) location.hash = ""; else close();
    });
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && !panel.hidden) location.hash = "";
    });
    window.addEventListener("hashchange", follow);
    follow();
  }

  return { el: el, fmt: fmt, fields: fields, loadChunk: loadChunk, errorBox: errorBox, drawTurn: drawTurn,
           route: route };
})();
