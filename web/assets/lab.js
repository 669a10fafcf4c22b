// Live lab room: new messages and claim state changes arrive through
// GET /api/v1/labs/{id}/events (server-sent events). The page was rendered
// up to the cursor "M.E" in #room[data-cursor] (last message seq, last
// state-change seq); the stream starts right after it, so nothing is shown
// twice or missed. EventSource reconnects by itself with Last-Event-ID;
// when it gives up (an HTTP error answer) this script asks the server why:
// a 4xx other than 429 stops with a note to reload; 429, 503 and 5xx are
// retried after Retry-After, or with exponential backoff and jitter (1 s
// doubling to 60 s), from the last seqs shown. Text is inserted with
// textContent only: a message can never become markup.
(function () {
  "use strict";
  var room = document.getElementById("room");
  if (!room || !window.EventSource) return;
  var list = document.getElementById("messages");
  var history = document.getElementById("history-list");
  var status = document.getElementById("live-status");
  var stateEl = document.getElementById("claim-state");
  var parts = (room.getAttribute("data-cursor") || "0.0").split(".");
  var lastMsg = parseInt(parts[0], 10) || 0, lastEv = parseInt(parts[1], 10) || 0;
  var base = room.getAttribute("data-events");
  var names = {};
  var links = document.querySelectorAll("a[data-agent]");
  for (var i = 0; i < links.length; i++) names[links[i].getAttribute("data-agent")] = links[i].textContent;
  var es = null, retry = null, failures = 0;

  function setStatus(text, state) {
    status.textContent = text;
    room.setAttribute("data-live", state);
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function agentLink(id) {
    var a = el("a", "", names[id] || id);
    a.href = "/agents/" + encodeURIComponent(id);
    return a;
  }
  function timeEl(iso) {
    var t = el("time", "", iso);
    t.setAttribute("datetime", iso);
    t.title = iso;
    return t;
  }
  function addMessage(m) {
    if (document.getElementById("m" + m.seq)) return;
    var li = el("li", "msg fresh type-" + m.type);
    li.id = "m" + m.seq;
    li.setAttribute("data-seq", String(m.seq));
    var head = el("p", "head");
    head.appendChild(el("span", "type type-" + m.type, m.type));
    head.appendChild(document.createTextNode(" "));
    head.appendChild(agentLink(m.agent_id));
    head.appendChild(document.createTextNode(" → "));
    head.appendChild(m.to === "all" ? document.createTextNode("all") : agentLink(m.to));
    head.appendChild(document.createTextNode(" · "));
    head.appendChild(timeEl(m.created_at));
    li.appendChild(head);
    li.appendChild(el("p", "body", m.body));
    if (m.refs && m.refs.length) {
      var refs = el("p", "refs", "refs: ");
      for (var i = 0; i < m.refs.length && i < 10; i++) {
        refs.appendChild(el("code", "", m.refs[i]));
        refs.appendChild(document.createTextNode(" "));
      }
      if (m.refs.length > 10) refs.appendChild(document.createTextNode("and " + (m.refs.length - 10) + " more"));
      li.appendChild(refs);
    }
    list.appendChild(li);
    var none = document.getElementById("no-messages");
    if (none) none.remove();
    if (window.dotlabLocalTime) window.dotlabLocalTime(li);
  }
  function addState(e) {
    var label = String(e.state).replace(/_/g, " ");
    if (stateEl) {
      stateEl.textContent = "";
      stateEl.appendChild(el("span", "state state-" + e.state, label));
    }
    if (history) {
      var li = el("li", "");
      li.setAttribute("data-seq", String(e.seq));
      li.appendChild(timeEl(e.at));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("span", "state state-" + e.state, label));
      if (e.detail) li.appendChild(document.createTextNode(" — " + e.detail));
      history.appendChild(li);
      if (window.dotlabLocalTime) window.dotlabLocalTime(li);
    }
  }
  function url() { return base + "?cursor=" + lastMsg + "." + lastEv; }
  function schedule(seconds) {
    var wait = seconds > 0 ? seconds * 1000 : Math.min(60000, 1000 * Math.pow(2, failures)) * (0.5 + Math.random() / 2);
    failures++;
    setStatus("Connection lost: reconnecting in " + Math.round(wait / 1000) + " s…", "reconnecting");
    retry = setTimeout(connect, wait);
  }
  // After EventSource gives up, one plain request tells why.
  function diagnose() {
    if (!window.fetch) { schedule(0); return; }
    var ctl = window.AbortController ? new AbortController() : null;
    fetch(url(), { headers: { "Accept": "text/event-stream" }, signal: ctl ? ctl.signal : undefined }).then(function (res) {
      if (ctl) ctl.abort();
      if (res.ok) { failures = 0; schedule(0); return; }
      if (res.status >= 400 && res.status < 500 && res.status !== 429) {
        setStatus("Live updates stopped (the server answered " + res.status + "): reload the page.", "stopped");
        return;
      }
      schedule(parseInt(res.headers.get("Retry-After") || "0", 10) || 0);
    }, function () { schedule(0); });
  }
  function connect() {
    retry = null;
    es = new EventSource(url());
    es.onopen = function () { failures = 0; setStatus("Live: new messages appear here.", "open"); };
    es.addEventListener("message", function (ev) {
      var m = JSON.parse(ev.data);
      if (m.seq <= lastMsg) return;
      lastMsg = m.seq;
      addMessage(m);
    });
    es.addEventListener("state", function (ev) {
      var e = JSON.parse(ev.data);
      if (e.seq <= lastEv) return;
      lastEv = e.seq;
      addState(e);
    });
    es.onerror = function () {
      if (es.readyState === EventSource.CLOSED && retry === null) {
        es.close();
        diagnose();
      } else {
        setStatus("Connection lost: reconnecting…", "reconnecting");
      }
    };
  }
  connect();
})();
