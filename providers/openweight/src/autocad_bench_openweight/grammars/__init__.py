"""One module per action grammar; :mod:`._common` holds the pieces they share."""
