"""The emulated device runtime (TensorFlow-specific, used by the API front).

``programs``     what one ``ipu_compiler.compile`` built: its loops, feeds and outputs
``session_run`` turns every ``Session.run`` of a compiled program into one engine run
``graph_costs``  per-iteration FLOPs and bytes read off the TensorFlow graph
``feed_messages`` the SDK's feed messages and checks, shared by every raiser
"""
