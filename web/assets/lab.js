// Live lab room: new messages and claim state changes arrive through
// GET /api/v1/labs/{id}/events (server-sent events). The page was rendered
// up to the cursor "M.E" in #room[data-cursor] (last message seq, last
// state-change seq); the stream starts right after it, so nothing is shown
// twice or missed. EventSource reconnects by itself with Last-Event-ID;
// when it gives up (an HTTP error while the server restarts) this script
// opens a new one from the last seqs it has shown. Text is inserted with
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
  var es = null, retry = null;

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
      for (var i = 0; i < m.refs.length; i++) {
        refs.appendChild(el("code", "", m.refs[i]));
        refs.appendChild(document.createTextNode(" "));
      }
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
  function connect() {
    retry = null;
    es = new EventSource(base + "?cursor=" + lastMsg + "." + lastEv);
    es.onopen = function () { setStatus("Live: new messages appear here.", "open"); };
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
      setStatus("Connection lost: reconnecting…", "reconnecting");
      if (es.readyState === EventSource.CLOSED && retry === null) {
        es.close();
        retry = setTimeout(connect, 1000);
      }
    };
  }
  connect();
})();
