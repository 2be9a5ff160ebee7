"""Robot bridge: authenticated websocket server next to a robot/simulator, and the trainer's client."""
