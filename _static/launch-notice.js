/* A book built from a copy whose _config.yml still has the placeholder repository address
 * (repository.url, example-org/mha-book) says plainly that its launch and source links work
 * only in the published book. The deploy workflow sets the real address, and there no notice
 * appears. Keep PLACEHOLDER in step with _config.yml.
 */
(function () {
  const PLACEHOLDER = "github.com/example-org/mha-book";
  const BINDER_PLACEHOLDER = "/v2/gh/example-org/mha-book/";

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
    notice.textContent =
      "This copy of the book was built locally: its launch (rocket) and " +
      "repository buttons need the published repository and do not work here. " +
      "To run a chapter, clone the repository and run make lab.";
    article.prepend(notice);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", addNotice);
  } else {
    addNotice();
  }
})();
