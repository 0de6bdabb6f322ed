"""autocad-bench backend ``ray``: LibreCAD desktops as Ray actors on a cluster."""
