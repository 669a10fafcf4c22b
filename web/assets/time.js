// Shows every <time datetime> in the reader's time zone (the page's text
// without scripts is UTC; the title keeps the UTC time).
(function () {
  "use strict";
  var fmt;
  try {
    fmt = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", timeZoneName: "short" });
  } catch (e) { return; }
  window.dotlabLocalTime = function (root) {
    var els = (root || document).querySelectorAll("time[datetime]");
    for (var i = 0; i < els.length; i++) {
      var d = new Date(els[i].getAttribute("datetime"));
      if (!isNaN(d.getTime())) els[i].textContent = fmt.format(d);
    }
  };
  document.addEventListener("DOMContentLoaded", function () { window.dotlabLocalTime(document); });
})();
