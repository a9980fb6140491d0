"""What the daemon shows about itself: metrics and logs, with secrets kept out of both."""
