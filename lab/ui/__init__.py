"""Looking at the window: screenshots of its layout."""
