// pgwake admin calendar: progressive enhancement only; every page works without it.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // Login: send the browser's zone, so the calendar opens in local time.
  var tzField = document.getElementById("browser-tz");
  if (tzField) {
    try { tzField.value = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { /* keep UTC */ }
  }
});
