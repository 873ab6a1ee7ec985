{"event": "trace", "schema": 1, "producer": "agentfsm"}
