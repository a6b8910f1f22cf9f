// django-celery-beat's periodic-task form: under the crontab field, the chosen schedule in words
// (what its inline script did, which the Content-Security-Policy blocks).
(function () {
  "use strict";
  var crontabs = JSON.parse(document.getElementById("readable-crontabs").textContent);
  var helpText = JSON.parse(document.getElementById("crontab-help").textContent);
  var select = document.getElementById("id_crontab");
  var help = document.querySelector(".field-crontab .help");
  var translation = document.querySelector(".field-crontab_translation");
  if (translation) translation.style.display = "none";
  if (!select || !help) return;
  select.addEventListener("change", function () {
    help.textContent = helpText;
    var words = crontabs[select.value];
    if (words) {
      help.appendChild(document.createElement("br"));
      help.appendChild(document.createTextNode("Translation: " + words));
    }
  });
})();
