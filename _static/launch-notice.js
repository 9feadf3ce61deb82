/* A book built from a copy whose _config.yml still has the placeholder repository address
 * (repository.url, example-org/mha-book) says plainly that its launch and source links work
 * only in the published book. The deploy workflow sets the real address, and there no notice
 * appears. Keep PLACEHOLDER in step with _config.yml.
 *
 * It says what works where it works: a book built for a Jupyter server of its own
 * (<meta name="mha-live">'s "server", _ext/live_code.py) runs its chapters with "Run this
 * page"; one whose Run asks Binder needs the published repository for that button too.
 */
(function () {
  const PLACEHOLDER = "github.com/example-org/mha-book";
  const BINDER_PLACEHOLDER = "/v2/gh/example-org/mha-book/";

  /* Whether "Run this page" asks a Jupyter server set when the book was built (not Binder). */
  function hasOwnServer() {
    const meta = document.querySelector('meta[name="mha-live"]');
    try {
      return Boolean(meta && JSON.parse(meta.content).server);
    } catch (error) {
      return false;
    }
  }

  function addNotice() {
    const links = Array.from(
      document.querySelectorAll(".article-header-buttons a[href]"),
    );
    const placeholder = links.some(function (a) {
      return a.href.includes(PLACEHOLDER) || a.href.includes(BINDER_PLACEHOLDER);
    });
    const article = document.querySelector("article.bd-article");
    if (!placeholder || !article) return;
    const notice = document.createElement("p");
    notice.className = "mha-launch-notice";
    notice.setAttribute("role", "note");
    notice.textContent = hasOwnServer()
      ? "This copy of the book was built locally: its launch (rocket) and repository " +
        "buttons need the published repository and do not work here. " +
        '"Run this page" works: it runs this chapter on the Jupyter server this copy ' +
        "was built for."
      : "This copy of the book was built locally: its launch (rocket), repository and " +
        '"Run this page" buttons need the published repository (Run asks Binder for it) ' +
        "and do not work here. To run a chapter, clone the repository and run make lab.";
    article.prepend(notice);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", addNotice);
  } else {
    addNotice();
  }
})();
