// DEBUG only (loaded by fedportal_htmx's {% htmx_script %}): an htmx request answered with a server
// error (5xx) shows Django's debug page full window. 4xx answers are left to the htmx-config in
// base.html, which swaps them in place like any other answer.
document.addEventListener("htmx:responseError", function (event) {
  const xhr = event.detail.xhr;
  if (xhr.status >= 500) {
    document.documentElement.innerHTML = xhr.response;
  }
});
