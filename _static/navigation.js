/* The ☰ (chapter list) and "On this page" buttons work at every width.
 *
 * pydata-sphinx-theme 0.17 renders these toggles twice: once in its own header, which
 * sphinx-book-theme 1.3 hides, and once in the book theme's article header, the one readers
 * see. Both themes wire up only the first of each (document.querySelector), so the visible
 * buttons did nothing. Here every later copy passes its click on to the wired-up first one:
 * below 992 px that opens the theme's sidebar dialog; from 992 px the book theme's own handler
 * on that button hides and shows the chapter list instead.
 *
 * On a phone or tablet either list opens as a dialog over the page. A tap on one of its links
 * closes the dialog (the theme leaves it open, over three quarters of a phone's screen, even when
 * the link only scrolls to a section of this page).
 */
(function () {
  function forwardClicks(selector) {
    const buttons = document.querySelectorAll(selector);
    const wired = buttons[0];
    buttons.forEach(function (button) {
      if (button === wired) return;
      button.addEventListener("click", function (event) {
        event.preventDefault();
        event.stopPropagation();
        wired.click();
        button.blur();
      });
    });
  }

  function closeAfterTap(dialog) {
    if (!dialog) return;
    dialog.addEventListener("click", function (event) {
      const link = event.target.closest("a[href]");
      if (!link || !dialog.open) return;
      // Close first, then go once the page is laid out without the dialog: scrolled to while
      // the dialog still held the page, a section ended up hundreds of pixels below the top.
      event.preventDefault();
      dialog.close();
      setTimeout(function () {
        window.location.assign(link.href);
      }, 0);
    });
  }

  function fixToggles() {
    forwardClicks(".primary-toggle");
    forwardClicks(".secondary-toggle");
    closeAfterTap(document.getElementById("pst-primary-sidebar-modal"));
    closeAfterTap(document.getElementById("pst-secondary-sidebar-modal"));
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", fixToggles);
  } else {
    fixToggles();
  }
})();
