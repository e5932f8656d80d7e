import BinderCommands
BinderCommand.runMain()
